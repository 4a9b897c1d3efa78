//! Enumerations of the v1 REST interface. On the wire they are names
//! (`"OIDC_APP_TYPE_NATIVE"`); requests may also send the numbers. In the store they are the
//! numbers.

/// Declares an enum with its wire names and numbers. The first variant is the default (0).
#[macro_export]
macro_rules! proto_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($variant:ident = $num:literal => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn number(self) -> i64 {
                match self { $($name::$variant => $num),+ }
            }

            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn from_number(n: i64) -> Option<Self> {
                match n { $($num => Some($name::$variant),)+ _ => None }
            }

            pub fn from_name(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }

            /// True for the zero value, which the wire format omits.
            pub fn is_default(&self) -> bool {
                *self == Self::ALL[0]
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::ALL[0]
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                // Written as names; requests may also send the numbers.
                utoipa::openapi::OneOfBuilder::new()
                    .item(
                        utoipa::openapi::ObjectBuilder::new()
                            .schema_type(utoipa::openapi::schema::Type::String)
                            .enum_values(Some([$($text),+])),
                    )
                    .item(
                        utoipa::openapi::ObjectBuilder::new()
                            .schema_type(utoipa::openapi::schema::Type::Integer)
                            .enum_values(Some([$($num),+])),
                    )
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "one of {}", [$($text),+].join(", "))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::from_name(v).ok_or_else(|| E::custom(format!(
                            "unknown value \"{}\", expected one of {}", v, [$($text),+].join(", "))))
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$name, E> {
                        $name::from_number(v).ok_or_else(|| E::custom(format!("unknown value {v}")))
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$name, E> {
                        self.visit_i64(i64::try_from(v).unwrap_or(-1))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

proto_enum! {
    pub enum UserState {
        Unspecified = 0 => "USER_STATE_UNSPECIFIED",
        Active = 1 => "USER_STATE_ACTIVE",
        Inactive = 2 => "USER_STATE_INACTIVE",
        Deleted = 3 => "USER_STATE_DELETED",
        Locked = 4 => "USER_STATE_LOCKED",
        Suspend = 5 => "USER_STATE_SUSPEND",
        Initial = 6 => "USER_STATE_INITIAL",
    }
}

proto_enum! {
    /// How SendHumanResetPasswordNotification sends its code.
    pub enum NotificationType {
        Email = 0 => "TYPE_EMAIL",
        Sms = 1 => "TYPE_SMS",
    }
}

proto_enum! {
    pub enum UserType {
        Unspecified = 0 => "TYPE_UNSPECIFIED",
        Human = 1 => "TYPE_HUMAN",
        Machine = 2 => "TYPE_MACHINE",
    }
}

proto_enum! {
    pub enum Gender {
        Unspecified = 0 => "GENDER_UNSPECIFIED",
        Female = 1 => "GENDER_FEMALE",
        Male = 2 => "GENDER_MALE",
        Diverse = 3 => "GENDER_DIVERSE",
    }
}

proto_enum! {
    pub enum AccessTokenType {
        Bearer = 0 => "ACCESS_TOKEN_TYPE_BEARER",
        Jwt = 1 => "ACCESS_TOKEN_TYPE_JWT",
    }
}

proto_enum! {
    pub enum OrgState {
        Unspecified = 0 => "ORG_STATE_UNSPECIFIED",
        Active = 1 => "ORG_STATE_ACTIVE",
        Inactive = 2 => "ORG_STATE_INACTIVE",
        Removed = 3 => "ORG_STATE_REMOVED",
    }
}

proto_enum! {
    pub enum DomainValidationType {
        Unspecified = 0 => "DOMAIN_VALIDATION_TYPE_UNSPECIFIED",
        Http = 1 => "DOMAIN_VALIDATION_TYPE_HTTP",
        Dns = 2 => "DOMAIN_VALIDATION_TYPE_DNS",
    }
}

proto_enum! {
    pub enum ProjectState {
        Unspecified = 0 => "PROJECT_STATE_UNSPECIFIED",
        Active = 1 => "PROJECT_STATE_ACTIVE",
        Inactive = 2 => "PROJECT_STATE_INACTIVE",
    }
}

proto_enum! {
    pub enum PrivateLabelingSetting {
        Unspecified = 0 => "PRIVATE_LABELING_SETTING_UNSPECIFIED",
        EnforceProjectResourceOwnerPolicy = 1 => "PRIVATE_LABELING_SETTING_ENFORCE_PROJECT_RESOURCE_OWNER_POLICY",
        AllowLoginUserResourceOwnerPolicy = 2 => "PRIVATE_LABELING_SETTING_ALLOW_LOGIN_USER_RESOURCE_OWNER_POLICY",
    }
}

proto_enum! {
    pub enum AppState {
        Unspecified = 0 => "APP_STATE_UNSPECIFIED",
        Active = 1 => "APP_STATE_ACTIVE",
        Inactive = 2 => "APP_STATE_INACTIVE",
    }
}

proto_enum! {
    pub enum OidcResponseType {
        Code = 0 => "OIDC_RESPONSE_TYPE_CODE",
        IdToken = 1 => "OIDC_RESPONSE_TYPE_ID_TOKEN",
        IdTokenToken = 2 => "OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN",
    }
}

proto_enum! {
    pub enum OidcGrantType {
        AuthorizationCode = 0 => "OIDC_GRANT_TYPE_AUTHORIZATION_CODE",
        Implicit = 1 => "OIDC_GRANT_TYPE_IMPLICIT",
        RefreshToken = 2 => "OIDC_GRANT_TYPE_REFRESH_TOKEN",
        DeviceCode = 3 => "OIDC_GRANT_TYPE_DEVICE_CODE",
        TokenExchange = 4 => "OIDC_GRANT_TYPE_TOKEN_EXCHANGE",
    }
}

proto_enum! {
    pub enum OidcAppType {
        Web = 0 => "OIDC_APP_TYPE_WEB",
        UserAgent = 1 => "OIDC_APP_TYPE_USER_AGENT",
        Native = 2 => "OIDC_APP_TYPE_NATIVE",
    }
}

proto_enum! {
    pub enum OidcAuthMethod {
        Basic = 0 => "OIDC_AUTH_METHOD_TYPE_BASIC",
        Post = 1 => "OIDC_AUTH_METHOD_TYPE_POST",
        None = 2 => "OIDC_AUTH_METHOD_TYPE_NONE",
        PrivateKeyJwt = 3 => "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT",
    }
}

proto_enum! {
    pub enum OidcTokenType {
        Bearer = 0 => "OIDC_TOKEN_TYPE_BEARER",
        Jwt = 1 => "OIDC_TOKEN_TYPE_JWT",
    }
}

proto_enum! {
    pub enum OidcVersion {
        V1_0 = 0 => "OIDC_VERSION_1_0",
    }
}

proto_enum! {
    pub enum ApiAuthMethod {
        Basic = 0 => "API_AUTH_METHOD_TYPE_BASIC",
        PrivateKeyJwt = 1 => "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT",
    }
}

proto_enum! {
    pub enum KeyType {
        Unspecified = 0 => "KEY_TYPE_UNSPECIFIED",
        Json = 1 => "KEY_TYPE_JSON",
    }
}

proto_enum! {
    pub enum UserGrantState {
        Unspecified = 0 => "USER_GRANT_STATE_UNSPECIFIED",
        Active = 1 => "USER_GRANT_STATE_ACTIVE",
        Inactive = 2 => "USER_GRANT_STATE_INACTIVE",
    }
}

proto_enum! {
    pub enum TextQueryMethod {
        Equals = 0 => "TEXT_QUERY_METHOD_EQUALS",
        EqualsIgnoreCase = 1 => "TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE",
        StartsWith = 2 => "TEXT_QUERY_METHOD_STARTS_WITH",
        StartsWithIgnoreCase = 3 => "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE",
        Contains = 4 => "TEXT_QUERY_METHOD_CONTAINS",
        ContainsIgnoreCase = 5 => "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE",
        EndsWith = 6 => "TEXT_QUERY_METHOD_ENDS_WITH",
        EndsWithIgnoreCase = 7 => "TEXT_QUERY_METHOD_ENDS_WITH_IGNORE_CASE",
    }
}

impl TextQueryMethod {
    /// Whether `value` matches `pattern` under this method, for filters applied in memory (the
    /// ignore-case methods compare Unicode lowercase one character at a time, as the searches
    /// in SQL do: a capital sigma is σ wherever it stands).
    pub fn matches(self, value: &str, pattern: &str) -> bool {
        use TextQueryMethod::*;
        let fold = matches!(self, EqualsIgnoreCase | StartsWithIgnoreCase | ContainsIgnoreCase | EndsWithIgnoreCase);
        let lower = crate::store::lower_chars;
        let (v, p) = if fold { (lower(value), lower(pattern)) } else { (value.into(), pattern.into()) };
        match self {
            Equals | EqualsIgnoreCase => v == p,
            StartsWith | StartsWithIgnoreCase => v.starts_with(&p),
            Contains | ContainsIgnoreCase => v.contains(&p),
            EndsWith | EndsWithIgnoreCase => v.ends_with(&p),
        }
    }
}

proto_enum! {
    pub enum UserFieldName {
        Unspecified = 0 => "USER_FIELD_NAME_UNSPECIFIED",
        UserName = 1 => "USER_FIELD_NAME_USER_NAME",
        FirstName = 2 => "USER_FIELD_NAME_FIRST_NAME",
        LastName = 3 => "USER_FIELD_NAME_LAST_NAME",
        NickName = 4 => "USER_FIELD_NAME_NICK_NAME",
        DisplayName = 5 => "USER_FIELD_NAME_DISPLAY_NAME",
        Email = 6 => "USER_FIELD_NAME_EMAIL",
        State = 7 => "USER_FIELD_NAME_STATE",
        Type = 8 => "USER_FIELD_NAME_TYPE",
        CreationDate = 9 => "USER_FIELD_NAME_CREATION_DATE",
    }
}

proto_enum! {
    pub enum OrgFieldName {
        Unspecified = 0 => "ORG_FIELD_NAME_UNSPECIFIED",
        Name = 1 => "ORG_FIELD_NAME_NAME",
    }
}

proto_enum! {
    pub enum PasswordlessType {
        NotAllowed = 0 => "PASSWORDLESS_TYPE_NOT_ALLOWED",
        Allowed = 1 => "PASSWORDLESS_TYPE_ALLOWED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        let t: OidcAppType = serde_json::from_str("\"OIDC_APP_TYPE_NATIVE\"").unwrap();
        assert_eq!(t, OidcAppType::Native);
        let t: OidcAppType = serde_json::from_str("2").unwrap();
        assert_eq!(t, OidcAppType::Native);
        assert!(serde_json::from_str::<OidcAppType>("\"NATIVE\"").is_err());
        assert!(serde_json::from_str::<OidcAppType>("7").is_err());
        assert_eq!(serde_json::to_string(&UserState::Locked).unwrap(), "\"USER_STATE_LOCKED\"");
        assert!(OidcAuthMethod::Basic.is_default());
        assert_eq!(UserState::from_number(6), Some(UserState::Initial));
    }

    #[test]
    fn in_memory_matches_fold_as_the_stores_do() {
        // A fragment of a word folds as the word does: the capital sigma is σ, never the final ς.
        assert!(TextQueryMethod::StartsWithIgnoreCase.matches("ΚΟΣΜΟΣ", "ΚΟΣ"));
        assert!(TextQueryMethod::EqualsIgnoreCase.matches("ΚΑΛΟΣ", "καλοσ"));
        assert!(!TextQueryMethod::StartsWith.matches("ΚΟΣΜΟΣ", "κος"));
    }
}
