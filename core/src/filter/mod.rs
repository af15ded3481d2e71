//! RocketMQ's SQL92 message filter: the language of `MessageSelector.bySql(..)`, which the
//! broker compiles (`SqlFilter`) and evaluates against each message's properties.
//!
//! ```
//! use std::collections::HashMap;
//! use rmqha_core::filter::SqlExpression;
//!
//! let expr = SqlExpression::compile("TAGS IN ('a', 'b') AND price BETWEEN 10 AND 20").unwrap();
//! let mut props = HashMap::new();
//! props.insert("TAGS".to_string(), "a".to_string());
//! props.insert("price".to_string(), "15".to_string());
//! assert!(expr.matches(&props));
//! ```
//!
//! The semantics are those of RocketMQ's Java sources (`filter/src/main/java/org/apache/rocketmq/
//! filter/`: `SelectorParser.jj`, `ComparisonExpression`, `UnaryExpression`, `LogicExpression`,
//! `ConstantExpression`), quirks included, except where listed under *Deviations*.
//!
//! # Grammar
//!
//! From loosest to tightest binding (`{..}` repeats, `[..]` is optional):
//!
//! ```text
//! selector   := or                          -- must be a condition (see below)
//! or         := and { OR and }
//! and        := equality { AND equality }
//! equality   := comparison { '=' comparison | '<>' comparison | IS NULL | IS NOT NULL }
//! comparison := unary { ('>' | '>=' | '<' | '<=') unary
//!                     | [NOT] BETWEEN unary AND unary
//!                     | [NOT] IN '(' string { ',' string } ')'
//!                     | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string }
//! unary      := '+' unary | '-' unary | NOT unary | primary
//! primary    := string | integer | float | TRUE | FALSE | NULL | identifier | '(' or ')'
//! ```
//!
//! `NOT` binds tighter than the comparisons: `NOT a = 1` is `(NOT a) = 1`; write `NOT (a = 1)`.
//! There is no arithmetic and no `LIKE` (RocketMQ removed both from ActiveMQ's grammar).
//!
//! Tokens: keywords are case-insensitive; identifiers (property names, case-sensitive) are
//! `[A-Za-z_$][A-Za-z0-9_$]*`; strings are `'...'` with `''` for a quote; integers are `0` or
//! `[1-9][0-9]*` with an optional `L`/`l` (no hex, no octal: `0x10` and `010` are syntax errors);
//! floats are `1.`, `1.5`, `.5`, `1e3`, `1.5E-3`; whitespace is space, tab, CR, LF, FF; comments
//! are `-- ...` to the end of the line and `/* ... */`.
//!
//! # Values and comparisons
//!
//! A property is a string, or null when the message does not have it. An integer literal is a
//! Java `Integer` when it fits 32 bits, else a `Long`; beyond 64 bits it is a compile error. A
//! float literal is a `Double`; RocketMQ rejects one above `Double.MAX_VALUE` or below
//! `Double.MIN_VALUE` — which includes `0.0` — and so does this module.
//!
//! Comparisons convert as RocketMQ's `ComparisonExpression.__compare` does:
//! - a property string against an integer literal is parsed with `Integer.valueOf` (or
//!   `Long.valueOf` for a `Long` literal): `a > 5` holds for `a = "10"`, and `a = "5.5"`,
//!   `"abc"`, `" 5"` or `"3000000000"` (not an `Integer`) make the evaluation fail;
//! - against a float literal, with `Double.valueOf` (which trims, and takes `NaN`, `Infinity`,
//!   `2.5d`, `1e3`);
//! - against `TRUE`/`FALSE`, with `Boolean.valueOf` (`"true"` in any case is true, all else false);
//! - two strings under `>`, `>=`, `<`, `<=` are both parsed as doubles; under `=`/`<>` they are
//!   compared as strings (`'1.0' = '1'` is false);
//! - `Integer`, `Long` and `Double` widen to each other; a number against a boolean is "less"
//!   (never equal); a boolean against a string fails (a `ClassCastException` in Java);
//! - doubles order as `Double.compare`: NaN above everything and equal to itself, `-0.0 < 0.0`.
//!
//! # Nulls, unknowns and errors
//!
//! - `>`, `>=`, `<`, `<=` with a null side are unknown; `BETWEEN` is `v >= lo AND v <= hi`,
//!   `NOT BETWEEN` is `v < lo OR v > hi`.
//! - `=`: both sides null is TRUE; a null left side is unknown; a null right side (left not null)
//!   is FALSE. So `a <> 'x'` is unknown when `a` is missing, but `'x' <> a` is TRUE.
//! - `IS NULL`/`IS NOT NULL` are TRUE or FALSE. `IN`/`NOT IN` on a missing property are unknown.
//! - `CONTAINS`, `STARTSWITH`, `ENDSWITH` and their `NOT` forms are FALSE, not unknown, when the
//!   left side is missing or not a string, and when the search string is empty.
//! - `AND`, `OR`, `NOT` are SQL's three-valued logic, evaluated left to right with short-circuit.
//! - A bare property used as a condition (`a`, `NOT a`, `a AND b`) is RocketMQ's boolean cast:
//!   unknown when missing, FALSE when present (even `"true"`: properties are strings).
//! - Unary minus of anything but a number (a property, a string, a condition) is null.
//!
//! [`SqlExpression::matches`] is true only for TRUE. Where Java throws while evaluating (a number
//! that does not parse, a class cast), the whole evaluation fails and the message does not match,
//! as the broker's `ExpressionMessageFilter` catches the exception and returns false. A
//! short-circuit can skip the failure: `FALSE AND a > 5` is FALSE even for `a = "x"`.
//!
//! RocketMQ's checks when it builds the expression are compile errors here: the operands of `>`,
//! `>=`, `<`, `<=`, `BETWEEN` cannot be string, boolean or null literals, nor conditions; `=`
//! and `<>` cannot take the `NULL` literal, nor `TRUE`/`FALSE` left of a non-boolean literal;
//! `IN` needs a property on its left; the whole expression and the operands of `AND`, `OR`,
//! `NOT` must be conditions or bare properties; two literal `BETWEEN` bounds must be non-null,
//! comparable, and low <= high (`NOT BETWEEN` is not checked, as in RocketMQ).
//!
//! # Versions
//!
//! RocketMQ 4.9.x has `=`, `<>`, `>`, `>=`, `<`, `<=`, `AND`, `OR`, `NOT`, `[NOT] BETWEEN`,
//! `[NOT] IN`, `IS [NOT] NULL`, `TRUE`, `FALSE`, `NULL`. 5.x added `[NOT] CONTAINS`
//! (apache/rocketmq#6864) and `[NOT] STARTSWITH`, `[NOT] ENDSWITH` (#6915), all accepted here;
//! they are keywords, so unlike 4.9.x a property cannot be named `contains`, `startswith` or
//! `endswith`. The rest of the semantics is the same in the 4.x and 5.x sources read.
//!
//! # Deviations from RocketMQ
//!
//! The expression comes from any client on the network, so:
//! - Limits: [`MAX_EXPRESSION_BYTES`] (16 KiB), [`MAX_DEPTH`] (64) levels of nesting —
//!   parentheses, `NOT` and signs while parsing, and chained operators such as
//!   `a = 1 = TRUE = ...` or `a IS NULL IS NULL ...` in the compiled tree — and
//!   [`MAX_IN_ITEMS`] (1024) strings in an `IN` list. RocketMQ has none; a deep expression ends
//!   in a `StackOverflowError` there, which Java catches, while in Rust it aborts the process.
//!   Long `AND`/`OR` chains are flattened, so they do not count as nesting.
//! - Trailing tokens are a syntax error. RocketMQ's grammar has no end-of-input rule, so
//!   `a = 1 b` or `(a = 1))` compile there as `a = 1`, silently dropping the rest.
//! - `--` always starts a comment, to the line break or the end of the input. RocketMQ needs the
//!   line break; without one the dashes are minus signs (`a = --1` is `a = 1` there, an error
//!   here: write `- -1`), and `a = 1 -- note` compiled only because trailing tokens are ignored.
//! - Property strings are parsed as numbers like Java's `Integer`/`Long`/`Double.valueOf` for
//!   ASCII input, but non-ASCII digits (which `Integer.valueOf` accepts) and hexadecimal floating
//!   strings (`"0x1p3"`, accepted by `Double.valueOf`) are not numbers here.
//! - Compile error messages and positions are this module's own (see [`SqlError`]).

pub mod sql92;

pub use sql92::{
    MAX_DEPTH, MAX_EXPRESSION_BYTES, MAX_IN_ITEMS, Properties, SqlError, SqlErrorKind, SqlExpression,
};

use crate::message::{RecordView, decode_record};
use crate::store::MessageFilter;

/// A stored record's properties as an expression sees them (RocketMQ's
/// `MessageEvaluationContext` over `MessageDecoder.decodeProperties`): user properties and
/// the system ones (`TAGS`, `KEYS`, ...); a value that is not UTF-8 reads as absent.
pub struct RecordProperties<'a>(pub RecordView<'a>);

impl Properties for RecordProperties<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.property(name).and_then(|v| std::str::from_utf8(v).ok())
    }
}

/// A compiled expression filters the store's reads directly, as a broker's SQL92 pull does
/// (RocketMQ's `ExpressionMessageFilter` without a ConsumeQueue extension): every queue
/// entry passes the first stage, and a record is kept only when the expression is TRUE for
/// its properties.
///
/// ```no_run
/// # fn demo(store: &rmqha_core::store::MessageStore) -> Result<(), rmqha_core::filter::SqlError> {
/// use rmqha_core::filter::SqlExpression;
/// let red = SqlExpression::compile("color = 'red' AND price > 10")?;
/// let r = store.get_messages_filtered("T", 0, 0, 32, 1 << 20, Some(&red));
/// # Ok(()) }
/// ```
impl MessageFilter for SqlExpression {
    fn matches_unit(&self, _tags_code: i64) -> bool {
        true
    }

    fn matches_record(&self, record: &[u8]) -> bool {
        decode_record(record).is_ok_and(|v| self.matches(&RecordProperties(v)))
    }
}

/// What a read keeps, as RocketMQ's consumer `MessageSelector` says it: a tag expression
/// (`byTag`: `"a || b"`, with `*` or an empty one passing everything) or a SQL92 one (`bySql`).
/// [`Broker::get_messages_selected`](crate::Broker::get_messages_selected) reads with one, and
/// the bindings' filtered reads build one from their `tags` / `sql` arguments.
///
/// A tag expression passes a message whose TAGS is one of its tags: the queue entry's tags
/// code is checked first, then the record's TAGS text, so two tags with the same Java hash code
/// are told apart (RocketMQ's broker checks only the code and leaves the text to its clients).
/// A SQL92 expression is compiled once, here, and evaluated against each record's properties.
///
/// ```
/// use rmqha_core::filter::MessageSelector;
/// let tags = MessageSelector::by_tag("red || blue");
/// assert_eq!(tags.expression_type(), "TAG");
/// let sql = MessageSelector::by_sql("price > 10").unwrap();
/// assert_eq!(sql.expression(), "price > 10");
/// assert!(MessageSelector::by_sql("price >").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct MessageSelector {
    filter: crate::processor::clients::ConsumerFilter,
    expression: String,
}

impl MessageSelector {
    /// A tag expression: tags separated by `||`; `*` or an empty expression pass everything.
    pub fn by_tag(expression: &str) -> Self {
        let filter = crate::processor::clients::ConsumerFilter::Tag(
            crate::processor::clients::TagFilter::parse(Some(expression)),
        );
        MessageSelector { filter, expression: expression.to_owned() }
    }

    /// A SQL92 expression (see the module's documentation), or why it does not compile.
    pub fn by_sql(expression: &str) -> Result<Self, SqlError> {
        let e = SqlExpression::compile(expression)?;
        let filter = crate::processor::clients::ConsumerFilter::Sql(std::sync::Arc::new(e));
        Ok(MessageSelector { filter, expression: expression.to_owned() })
    }

    /// The selector of a binding's read, from its `tags` and `sql` arguments: at most one of
    /// them may be given, and neither means every message (the tag expression `*`). An error
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument)) names what was wrong: both
    /// given, or where the SQL92 expression does not compile.
    pub fn from_tags_or_sql(tags: Option<&str>, sql: Option<&str>) -> crate::Result<Self> {
        match (tags, sql) {
            (Some(_), Some(_)) => Err(crate::Error::InvalidArgument(
                "give tags or sql, not both (a read has one expression)".into(),
            )),
            (Some(t), None) => Ok(Self::by_tag(t)),
            (None, Some(q)) => Self::by_sql(q).map_err(|e| crate::Error::InvalidArgument(e.to_string())),
            (None, None) => Ok(Self::by_tag("*")),
        }
    }

    /// `TAG` or `SQL92` (RocketMQ's `ExpressionType`).
    pub fn expression_type(&self) -> &'static str {
        match self.filter {
            crate::processor::clients::ConsumerFilter::Tag(_) => "TAG",
            _ => crate::processor::clients::SQL92,
        }
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether it passes every message (a tag expression `*` or empty).
    pub fn is_all(&self) -> bool {
        self.filter.is_all()
    }
}

impl MessageFilter for MessageSelector {
    fn matches_unit(&self, tags_code: i64) -> bool {
        self.filter.matches_unit(tags_code)
    }

    fn matches_record(&self, record: &[u8]) -> bool {
        self.filter.matches_record(record)
    }
}
