//! Shapes shared by every v1 resource: `details`, list queries and list details, timestamps,
//! durations and the zero-value omission of the wire format.

use serde::{Deserialize, Deserializer, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::error::ApiError;
use crate::store::query::Page;

/// RFC 3339 UTC timestamp of unix seconds.
pub fn ts(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs).ok().and_then(|t| t.format(&Rfc3339).ok()).unwrap_or_default()
}

/// Parses an RFC 3339 timestamp into unix seconds.
/// Only times [`ts`] can write back: an offset may carry the last day of year 9999 into
/// year 10000, which reads as an empty timestamp afterwards.
pub fn parse_ts(field: &str, s: &str) -> Result<i64, ApiError> {
    OffsetDateTime::parse(s, &Rfc3339).ok().map(|t| t.unix_timestamp()).filter(|t| !ts(*t).is_empty()).ok_or_else(
        || ApiError::invalid(format!("invalid {field}: '{s}' is not an RFC 3339 timestamp up to the year 9999")),
    )
}

pub fn is_false(b: &bool) -> bool {
    !*b
}

/// `details` of a mutation or read.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Details {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_date: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_date: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_owner: String,
}

impl Details {
    /// After a create: creation date, no change date.
    pub fn created(at: i64, owner: &str) -> Self {
        Self { creation_date: Some(ts(at)), change_date: None, resource_owner: owner.to_string() }
    }

    /// After a change or removal: change date, no creation date.
    pub fn changed(at: i64, owner: &str) -> Self {
        Self { creation_date: None, change_date: Some(ts(at)), resource_owner: owner.to_string() }
    }

    /// On reads: both.
    pub fn read(created: i64, changed: i64, owner: &str) -> Self {
        Self { creation_date: Some(ts(created)), change_date: Some(ts(changed)), resource_owner: owner.to_string() }
    }
}

/// `{"details": ...}`: the response of most mutations.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DetailsResponse {
    pub details: Details,
}

/// A number sent as a JSON number or a string (64-bit fields are strings on the wire). Like
/// protobuf JSON, a number written with a zero fraction (`5.0`, `1e3`) is accepted.
pub fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Num(u64),
        Float(f64),
        Str(String),
    }
    match N::deserialize(d)? {
        N::Num(n) => Ok(n),
        // Up to 2^53, where every integer is exact.
        N::Float(f) if f.fract() == 0.0 && (0.0..=MAX_EXACT as f64).contains(&f) => Ok(f as u64),
        N::Float(f) => Err(serde::de::Error::custom(format!("{f} is not a whole number from 0 to 2^53"))),
        N::Str(s) => s.trim().parse().map_err(|_| serde::de::Error::custom(format!("'{s}' is not a number"))),
    }
}

/// 2^53: the largest whole number a JSON number carries exactly everywhere.
const MAX_EXACT: u64 = 1 << 53;

/// The schema of a [`lenient_u64`] field: a whole number, or its decimal digits as a string
/// (written with a fraction, a number must stay within 2^53).
pub fn lenient_u64_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)).maximum(Some(u64::MAX)))
        .item(ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^\s*[0-9]{1,20}\s*$")))
        .into()
}

/// The `query` of every `_search` call.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListQuery {
    #[schema(schema_with = lenient_u64_schema)]
    pub offset: u64,
    #[schema(schema_with = lenient_u64_schema)]
    pub limit: u64,
    pub asc: bool,
}

/// Only a JSON object is a query: a derived `Deserialize` would also read an array as the
/// fields in order (`[]` as every default), which the schema does not allow.
impl<'de> Deserialize<'de> for ListQuery {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Fields {
            #[serde(deserialize_with = "lenient_u64")]
            offset: u64,
            #[serde(deserialize_with = "lenient_u64")]
            limit: u64,
            asc: bool,
        }
        let value = serde_json::Value::deserialize(d)?;
        if !value.is_object() {
            return Err(serde::de::Error::custom("the query must be an object"));
        }
        let f = Fields::deserialize(value).map_err(serde::de::Error::custom)?;
        Ok(ListQuery { offset: f.offset, limit: f.limit, asc: f.asc })
    }
}

/// Bounds on the filters of one `_search` call, so that each becomes SQL both stores run:
/// SQLite refuses expressions over 1,000 levels deep, over 32,766 variables and LIKE patterns
/// over 50,000 bytes, PostgreSQL statements over 65,535 parameters. Text values have the
/// reference's 200 characters.
pub struct SearchBudget {
    what: &'static str,
    terms: usize,
    ids: usize,
}

impl SearchBudget {
    /// Filters (each query of `queries`, nested ones included) in one request.
    pub const MAX_TERMS: usize = 100;
    /// Ids in the id lists of one request.
    pub const MAX_IDS: usize = 1000;
    /// Characters of one text value.
    pub const MAX_TEXT: usize = 200;

    /// `what` names the request in errors (`ListUsersRequest`).
    pub fn new(what: &'static str) -> Self {
        Self { what, terms: 0, ids: 0 }
    }

    /// One element of `queries` sets `set` of its members: exactly one is allowed (none would
    /// read as no filter and keep every row).
    pub fn one_member(&self, set: usize) -> Result<(), ApiError> {
        match set {
            1 => Ok(()),
            0 => {
                Err(ApiError::invalid(format!("invalid {}.queries: each query must set one of its members", self.what)))
            }
            _ => Err(ApiError::invalid(format!(
                "invalid {}.queries: each query may set only one of its members",
                self.what
            ))),
        }
    }

    /// Counts one filter.
    pub fn term(&mut self) -> Result<(), ApiError> {
        self.terms += 1;
        if self.terms > Self::MAX_TERMS {
            return Err(ApiError::invalid(format!(
                "invalid {}.queries: more than {} queries",
                self.what,
                Self::MAX_TERMS
            )));
        }
        Ok(())
    }

    /// Counts `n` ids of an id list.
    pub fn ids(&mut self, n: usize) -> Result<(), ApiError> {
        self.ids += n;
        if self.ids > Self::MAX_IDS {
            return Err(ApiError::invalid(format!("invalid {}.queries: more than {} ids", self.what, Self::MAX_IDS)));
        }
        Ok(())
    }

    /// A text value, if it is short enough.
    pub fn text(&self, v: &str) -> Result<String, ApiError> {
        if v.chars().count() > Self::MAX_TEXT {
            return Err(ApiError::invalid(format!(
                "invalid {}.queries: a value is longer than {} characters",
                self.what,
                Self::MAX_TEXT
            )));
        }
        Ok(v.to_string())
    }
}

/// Results per page when the request sets no limit, and the most a request may ask for.
pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;

impl ListQuery {
    pub fn page(&self) -> Result<Page, ApiError> {
        let limit = if self.limit == 0 { DEFAULT_LIMIT } else { self.limit };
        if limit > MAX_LIMIT {
            return Err(ApiError::invalid(format!("invalid query.limit: at most {MAX_LIMIT} results per page")));
        }
        if self.offset > i64::MAX as u64 {
            return Err(ApiError::invalid("invalid query.offset: too large"));
        }
        Ok(Page { offset: self.offset as i64, limit: limit as i64, asc: self.asc })
    }
}

/// `details` of a list response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListDetails {
    pub total_result: String,
    pub view_timestamp: String,
}

impl ListDetails {
    pub fn new(total: i64, now: i64) -> Self {
        Self { total_result: total.to_string(), view_timestamp: ts(now) }
    }
}

/// `{"details": ..., "result": [...]}`; `result` is omitted when empty.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListResponse<T: Serialize> {
    pub details: ListDetails,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sorting_column: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub result: Vec<T>,
}

/// A protobuf duration in a request (`"43200s"`, also Go forms like `"12h"`), in seconds.
pub fn duration_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s {
        None => Ok(None),
        Some(s) => crate::domain::duration::parse(&s)
            .map(|d| Some(d.as_secs() as i64))
            .map_err(|e| serde::de::Error::custom(format!("'{s}' {e}"))),
    }
}

/// A duration in seconds as a protobuf JSON string.
pub fn duration_str(secs: i64) -> String {
    format!("{secs}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_query_bounds() {
        let q: ListQuery = serde_json::from_str(r#"{"offset":"5","limit":50,"asc":true}"#).unwrap();
        let p = q.page().unwrap();
        assert_eq!((p.offset, p.limit, p.asc), (5, 50, true));
        let q: ListQuery = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(q.page().unwrap().limit, 100);
        let q: ListQuery = serde_json::from_str(r#"{"limit":5000}"#).unwrap();
        assert!(q.page().is_err());
        assert!(serde_json::from_str::<ListQuery>(r#"{"offset":"x"}"#).is_err());
        let q: ListQuery = serde_json::from_str(r#"{"offset":5.0,"limit":1e2}"#).unwrap();
        assert_eq!((q.offset, q.limit), (5, 100));
        assert!(serde_json::from_str::<ListQuery>(r#"{"offset":1.5}"#).is_err());
        assert!(serde_json::from_str::<ListQuery>(r#"{"offset":-1}"#).is_err());
        assert!(serde_json::from_str::<ListQuery>("[]").is_err());
    }

    #[test]
    fn timestamps() {
        assert_eq!(ts(0), "1970-01-01T00:00:00Z");
        assert_eq!(parse_ts("f", "2030-01-01T00:00:00Z").unwrap(), 1_893_456_000);
        assert!(parse_ts("f", "tomorrow").is_err());
        assert_eq!(ts(parse_ts("f", "9999-12-31T23:59:59Z").unwrap()), "9999-12-31T23:59:59Z");
        assert!(parse_ts("f", "9999-12-31T23:59:59-23:59").is_err(), "year 10000 in UTC");
    }
}
