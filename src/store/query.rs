//! A small builder for the dynamic parts of search queries (filters, order, paging). Values are
//! always bound, never spliced into the SQL text.

use sqlx::any::AnyRow;
use sqlx::{Any, FromRow};

use crate::domain::enums::TextQueryMethod;

#[derive(Debug, Clone)]
pub enum Arg {
    Text(String),
    Int(i64),
    OptText(Option<String>),
    OptInt(Option<i64>),
    OptBytes(Option<Vec<u8>>),
}

impl Arg {
    fn bind_to<'q, O>(
        self,
        q: sqlx::query::QueryAs<'q, Any, O, sqlx::any::AnyArguments<'q>>,
    ) -> sqlx::query::QueryAs<'q, Any, O, sqlx::any::AnyArguments<'q>> {
        match self {
            Arg::Text(s) => q.bind(s),
            Arg::Int(i) => q.bind(i),
            Arg::OptText(s) => q.bind(s),
            Arg::OptInt(i) => q.bind(i),
            Arg::OptBytes(b) => q.bind(b),
        }
    }
}

/// Inserts `rows` with one statement per `per_statement` rows (bulk imports). `head` is the
/// statement up to and including `VALUES`; every row has one value per column.
pub async fn insert_rows(
    c: &mut super::Conn,
    head: &str,
    rows: Vec<Vec<Arg>>,
    per_statement: usize,
) -> super::Result<()> {
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let mut sql = String::from(head);
        let mut args: Vec<Arg> = Vec::new();
        for (i, row) in rows.by_ref().take(per_statement.max(1)).enumerate() {
            sql.push_str(if i == 0 { " (" } else { ", (" });
            for (j, v) in row.into_iter().enumerate() {
                args.push(v);
                if j > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("${}", args.len()));
            }
            sql.push(')');
        }
        let mut q = sqlx::query(&sql);
        for a in args {
            q = match a {
                Arg::Text(s) => q.bind(s),
                Arg::Int(i) => q.bind(i),
                Arg::OptText(s) => q.bind(s),
                Arg::OptInt(i) => q.bind(i),
                Arg::OptBytes(b) => q.bind(b),
            };
        }
        q.execute(&mut *c).await?;
    }
    Ok(())
}

#[derive(Debug, Default)]
pub struct Builder {
    pub sql: String,
    args: Vec<Arg>,
}

/// Offset, limit and direction of a list call.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub offset: i64,
    pub limit: i64,
    pub asc: bool,
}

impl Builder {
    pub fn new(sql: &str) -> Self {
        Self { sql: sql.to_string(), args: Vec::new() }
    }

    /// Starts from SQL whose placeholders `$1..` are already bound to `args`.
    pub fn with_args(sql: &str, args: Vec<Arg>) -> Self {
        Self { sql: sql.to_string(), args }
    }

    pub fn into_parts(self) -> (String, Vec<Arg>) {
        (self.sql, self.args)
    }

    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends a placeholder bound to `arg`.
    pub fn bind(&mut self, arg: Arg) -> &mut Self {
        self.args.push(arg);
        self.sql.push_str(&format!("${}", self.args.len()));
        self
    }

    pub fn text(&mut self, v: impl Into<String>) -> &mut Self {
        self.bind(Arg::Text(v.into()))
    }

    pub fn int(&mut self, v: i64) -> &mut Self {
        self.bind(Arg::Int(v))
    }

    /// A text comparison with one of the query methods. `column` is an SQL expression.
    pub fn text_match(&mut self, column: &str, value: &str, method: TextQueryMethod) -> &mut Self {
        use TextQueryMethod::*;
        let escaped = super::like_escape(value);
        let ignore_case =
            matches!(method, EqualsIgnoreCase | StartsWithIgnoreCase | ContainsIgnoreCase | EndsWithIgnoreCase);
        let (col, esc) = if ignore_case {
            (format!("lower({column})"), super::lower_chars(&escaped))
        } else {
            (column.to_string(), escaped)
        };
        match method {
            Equals => self.push(&format!("{column} = ")).text(value),
            EqualsIgnoreCase => self.push(&format!("{col} = ")).text(super::lower_chars(value)),
            StartsWith | StartsWithIgnoreCase => {
                self.push(&format!("{col} LIKE ")).text(format!("{esc}%")).push(" ESCAPE '\\'")
            }
            Contains | ContainsIgnoreCase => {
                self.push(&format!("{col} LIKE ")).text(format!("%{esc}%")).push(" ESCAPE '\\'")
            }
            EndsWith | EndsWithIgnoreCase => {
                self.push(&format!("{col} LIKE ")).text(format!("%{esc}")).push(" ESCAPE '\\'")
            }
        }
    }

    pub fn page(&mut self, order_by: &str, page: Page) -> &mut Self {
        let dir = if page.asc { "ASC" } else { "DESC" };
        let order: Vec<String> = order_by.split(',').map(|c| format!("{} {dir}", c.trim())).collect();
        self.push(&format!(" ORDER BY {} LIMIT ", order.join(", "))).int(page.limit).push(" OFFSET ").int(page.offset)
    }

    pub async fn fetch_all<T>(&self, c: &mut super::Conn) -> super::Result<Vec<T>>
    where
        T: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        let mut q = sqlx::query_as::<Any, T>(&self.sql);
        for a in &self.args {
            q = a.clone().bind_to(q);
        }
        Ok(q.fetch_all(&mut *c).await?)
    }

    pub async fn fetch_count(&self, c: &mut super::Conn) -> super::Result<i64> {
        let mut q = sqlx::query_as::<Any, (i64,)>(&self.sql);
        for a in &self.args {
            q = a.clone().bind_to(q);
        }
        Ok(q.fetch_one(&mut *c).await?.0)
    }
}
