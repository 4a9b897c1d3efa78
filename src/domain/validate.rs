//! Input rules of the v1 interface. Each check names the request and field in its message, in
//! the style of the gateway's validator: `invalid AddHumanUserRequest.userName: value length must
//! be between 1 and 200 runes, inclusive`.

use url::Url;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub type Check = Result<(), Invalid>;

fn invalid(req: &str, field: &str, what: impl std::fmt::Display) -> Invalid {
    Invalid(format!("invalid {req}.{field}: {what}"))
}

/// `min..=max` characters (runes).
pub fn length(req: &str, field: &str, value: &str, min: usize, max: usize) -> Check {
    let n = value.chars().count();
    if n < min || n > max {
        return Err(invalid(req, field, format!("value length must be between {min} and {max} runes, inclusive")));
    }
    Ok(())
}

/// Required, non-blank, at most `max` characters.
pub fn required(req: &str, field: &str, value: &str, max: usize) -> Check {
    length(req, field, value, 1, max)?;
    if value.trim().is_empty() {
        return Err(invalid(req, field, "value must not be blank"));
    }
    Ok(())
}

pub fn max(req: &str, field: &str, value: &str, max: usize) -> Check {
    length(req, field, value, 0, max)
}

/// No control characters (line breaks, tabs, NUL, C1 controls): for names that end up in
/// pages, e-mail greetings and tokens.
pub fn no_controls(req: &str, field: &str, value: &str) -> Check {
    if value.chars().any(char::is_control) {
        return Err(invalid(req, field, "value must not contain control characters"));
    }
    Ok(())
}

/// A plausible e-mail address: `local@domain.tld`, no spaces, at most 200 characters.
pub fn email(req: &str, field: &str, value: &str) -> Check {
    length(req, field, value, 1, 200)?;
    let ok = match value.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !value.chars().any(|c| c.is_whitespace() || c.is_control())
                && value.matches('@').count() == 1
        }
        None => false,
    };
    if !ok {
        return Err(invalid(req, field, "value must be a valid email address"));
    }
    Ok(())
}

/// `+` followed by digits (spaces, dashes and brackets allowed), 1 to 50 characters.
pub fn phone(req: &str, field: &str, value: &str) -> Check {
    length(req, field, value, 1, 50)?;
    let digits = value.chars().filter(|c| c.is_ascii_digit()).count();
    let ok = value.starts_with('+')
        && digits >= 3
        && value[1..].chars().all(|c| c.is_ascii_digit() || matches!(c, ' ' | '-' | '(' | ')'));
    if !ok {
        return Err(invalid(req, field, "value must be a phone number in international format, starting with +"));
    }
    Ok(())
}

/// A DNS name: labels of letters, digits and hyphens separated by dots.
pub fn domain(req: &str, field: &str, value: &str) -> Check {
    length(req, field, value, 1, 200)?;
    let ok = value.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    });
    if !ok {
        return Err(invalid(req, field, "value must be a domain name"));
    }
    Ok(())
}

/// An absolute URI without a fragment (RFC 6749 3.1.2), of no scheme that runs or carries
/// content in a browser (`javascript:`, `data:`, `vbscript:`: a redirect there would be script
/// on whatever page followed it; RFC 9700 4.1).
pub fn redirect_uri(req: &str, field: &str, value: &str) -> Check {
    length(req, field, value, 1, 2000)?;
    match Url::parse(value) {
        Ok(u) if u.fragment().is_some() => Err(invalid(req, field, "a redirect URI must not contain a fragment")),
        Ok(u) if matches!(u.scheme(), "javascript" | "data" | "vbscript") => {
            Err(invalid(req, field, format!("a redirect URI must not use the scheme '{}'", u.scheme())))
        }
        Ok(_) => Ok(()),
        Err(_) => Err(invalid(req, field, format!("'{value}' is not an absolute URI"))),
    }
}

/// A bare origin: `scheme://host[:port]`.
pub fn origin(req: &str, field: &str, value: &str) -> Check {
    let ok = Url::parse(value)
        .map(|u| {
            u.host_str().is_some()
                && (u.path() == "/" || u.path().is_empty())
                && u.query().is_none()
                && u.fragment().is_none()
                && !value.ends_with('/')
                && u.username().is_empty()
        })
        .unwrap_or(false);
    if !ok {
        return Err(invalid(req, field, format!("'{value}' is not an origin (scheme://host[:port])")));
    }
    Ok(())
}

/// A lowercase DNS label derived from a name (`My Org` -> `my-org`).
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in name.trim().to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
            dash = false;
        } else if !dash && !out.is_empty() {
            out.push('-');
            dash = true;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "org".into() } else { out.chars().take(63).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls() {
        assert!(no_controls("R", "f", "Zoë Ünal-O'Brien").is_ok());
        for bad in ["a\nb", "a\rb", "a\tb", "a\0b", "a\u{85}b"] {
            assert!(no_controls("R", "f", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lengths() {
        assert!(length("R", "f", "", 1, 200).is_err());
        assert!(length("R", "f", &"ä".repeat(200), 1, 200).is_ok());
        assert!(length("R", "f", &"a".repeat(201), 1, 200).is_err());
        let msg = required("AddHumanUserRequest", "userName", " ", 200).unwrap_err().0;
        assert!(msg.starts_with("invalid AddHumanUserRequest.userName"), "{msg}");
    }

    #[test]
    fn emails_and_phones() {
        assert!(email("R", "e", "a@b.co").is_ok());
        for bad in ["", "a", "a@b", "@b.co", "a@.co", "a b@c.de", "a@b.co.", "a@b@c.de"] {
            assert!(email("R", "e", bad).is_err(), "{bad}");
        }
        assert!(phone("R", "p", "+41 79 123 45 67").is_ok());
        assert!(phone("R", "p", "0791234567").is_err());
        assert!(phone("R", "p", "+41abc").is_err());
    }

    #[test]
    fn uris() {
        assert!(redirect_uri("R", "u", "https://app.example.com/cb").is_ok());
        assert!(redirect_uri("R", "u", "http://localhost:3000/cb?x=1").is_ok());
        assert!(redirect_uri("R", "u", "com.example.app:/callback").is_ok());
        assert!(redirect_uri("R", "u", "https://app.example.com/cb#frag").is_err());
        assert!(redirect_uri("R", "u", "/relative").is_err());
        for script in ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "vbscript:x"] {
            assert!(redirect_uri("R", "u", script).is_err(), "{script}");
        }
        assert!(origin("R", "o", "https://app.example.com").is_ok());
        assert!(origin("R", "o", "http://localhost:3000").is_ok());
        assert!(origin("R", "o", "https://app.example.com/").is_err());
        assert!(origin("R", "o", "https://app.example.com/x").is_err());
    }

    #[test]
    fn domains_and_slugs() {
        assert!(domain("R", "d", "acme.example.com").is_ok());
        assert!(domain("R", "d", "-acme.com").is_err());
        assert!(domain("R", "d", "ac me.com").is_err());
        assert_eq!(slug("My Org!"), "my-org");
        assert_eq!(slug("  "), "org");
        assert_eq!(slug("Zürich AG"), "z-rich-ag");
    }
}
