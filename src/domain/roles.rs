//! Administrative roles and the permissions they carry. Instance roles (`IAM_*`) act on every
//! organization; organization roles (`ORG_*`) act on their own organization only.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permission {
    // Instance scope: only instance roles grant these.
    IamRead,
    IamWrite,
    IamMemberRead,
    IamMemberWrite,
    IamPolicyRead,
    IamPolicyWrite,
    FeatureWrite,
    WebKeyRead,
    WebKeyWrite,
    OrgCreate,
    /// Reading users of any organization (GetUserByLoginNameGlobal).
    UserGlobalRead,
    // Organization scope.
    OrgRead,
    OrgWrite,
    OrgDelete,
    OrgMemberRead,
    OrgMemberWrite,
    PolicyRead,
    PolicyWrite,
    UserRead,
    UserWrite,
    UserDelete,
    UserGrantRead,
    UserGrantWrite,
    UserGrantDelete,
    ProjectCreate,
    ProjectRead,
    ProjectWrite,
    ProjectDelete,
    AppRead,
    AppWrite,
    AppDelete,
}

use Permission::*;

impl Permission {
    pub fn is_instance_scope(self) -> bool {
        matches!(
            self,
            IamRead
                | IamWrite
                | IamMemberRead
                | IamMemberWrite
                | IamPolicyRead
                | IamPolicyWrite
                | FeatureWrite
                | WebKeyRead
                | WebKeyWrite
                | OrgCreate
                | UserGlobalRead
        )
    }

    fn is_read(self) -> bool {
        matches!(
            self,
            IamRead
                | IamMemberRead
                | IamPolicyRead
                | WebKeyRead
                | UserGlobalRead
                | OrgRead
                | OrgMemberRead
                | PolicyRead
                | UserRead
                | UserGrantRead
                | ProjectRead
                | AppRead
        )
    }
}

/// Instance roles.
pub const IAM_ROLES: &[&str] =
    &["IAM_OWNER", "IAM_OWNER_VIEWER", "IAM_ORG_MANAGER", "IAM_USER_MANAGER", "IAM_END_USER_IMPERSONATOR"];

/// Organization roles.
pub const ORG_ROLES: &[&str] = &[
    "ORG_OWNER",
    "ORG_OWNER_VIEWER",
    "ORG_USER_MANAGER",
    "ORG_USER_PERMISSION_EDITOR",
    "ORG_PROJECT_CREATOR",
    "ORG_END_USER_IMPERSONATOR",
];

/// Project member roles. latch stores them (imports keep them) but grants nothing through them
/// yet: projects are managed by organization roles.
pub const PROJECT_ROLES: &[&str] =
    &["PROJECT_OWNER", "PROJECT_OWNER_VIEWER", "PROJECT_OWNER_GLOBAL", "PROJECT_OWNER_VIEWER_GLOBAL"];

/// May impersonate users through token exchange (instance-wide, or in its organization).
pub const IAM_IMPERSONATOR: &str = "IAM_END_USER_IMPERSONATOR";
pub const ORG_IMPERSONATOR: &str = "ORG_END_USER_IMPERSONATOR";

/// Whether `role` grants `perm` (for organization roles: within their organization).
pub fn grants(role: &str, perm: Permission) -> bool {
    match role {
        "IAM_OWNER" => true,
        "IAM_OWNER_VIEWER" => perm.is_read(),
        "IAM_ORG_MANAGER" => perm == OrgCreate || perm == IamRead || !perm.is_instance_scope(),
        "IAM_USER_MANAGER" => {
            matches!(
                perm,
                OrgRead
                    | UserRead
                    | UserWrite
                    | UserDelete
                    | UserGrantRead
                    | UserGrantWrite
                    | UserGrantDelete
                    | UserGlobalRead
            )
        }
        "ORG_OWNER" => !perm.is_instance_scope(),
        "ORG_OWNER_VIEWER" => !perm.is_instance_scope() && perm.is_read(),
        "ORG_USER_MANAGER" => matches!(
            perm,
            OrgRead
                | UserRead
                | UserWrite
                | UserDelete
                | UserGrantRead
                | UserGrantWrite
                | UserGrantDelete
                | OrgMemberRead
                | PolicyRead
        ),
        "ORG_USER_PERMISSION_EDITOR" => {
            matches!(perm, OrgRead | UserRead | UserGrantRead | UserGrantWrite | UserGrantDelete)
        }
        "ORG_PROJECT_CREATOR" => matches!(perm, OrgRead | ProjectCreate),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_matrix() {
        assert!(grants("IAM_OWNER", WebKeyWrite));
        assert!(!grants("ORG_OWNER", WebKeyWrite));
        assert!(!grants("ORG_OWNER", OrgCreate));
        assert!(grants("ORG_OWNER", AppWrite));
        assert!(grants("ORG_USER_MANAGER", UserWrite));
        assert!(!grants("ORG_USER_MANAGER", ProjectWrite));
        assert!(grants("IAM_OWNER_VIEWER", UserRead));
        assert!(!grants("IAM_OWNER_VIEWER", UserWrite));
        assert!(!grants("NOT_A_ROLE", UserRead));
    }
}
