//! Lexer, parser and evaluator of RocketMQ's SQL92 filter; the semantics are described in the
//! [module docs](crate::filter).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

/// The longest expression [`SqlExpression::compile`] accepts, in bytes of UTF-8.
pub const MAX_EXPRESSION_BYTES: usize = 16 * 1024;
/// How deep an expression may nest: open parentheses, `NOT` and signs while parsing, and the
/// height of the compiled tree (chained `=`, `<>`, `IS NULL`, `CONTAINS`... each add a level;
/// `AND`/`OR` chains are flattened and add one).
pub const MAX_DEPTH: usize = 64;
/// The most strings an `IN (...)` list may hold.
pub const MAX_IN_ITEMS: usize = 1024;

/// A message's properties as the evaluation context (RocketMQ's `MessageEvaluationContext`:
/// property name -> string value; a missing property is SQL null).
pub trait Properties {
    /// The value of property `name`, if the message has it.
    fn get(&self, name: &str) -> Option<&str>;
}

impl<S: BuildHasher> Properties for HashMap<String, String, S> {
    fn get(&self, name: &str) -> Option<&str> {
        HashMap::get(self, name).map(String::as_str)
    }
}

impl Properties for BTreeMap<String, String> {
    fn get(&self, name: &str) -> Option<&str> {
        BTreeMap::get(self, name).map(String::as_str)
    }
}

/// Name/value pairs; the first pair with the name wins.
impl Properties for [(&str, &str)] {
    fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }
}

/// Name/value pairs; the first pair with the name wins.
impl<const N: usize> Properties for [(&str, &str); N] {
    fn get(&self, name: &str) -> Option<&str> {
        Properties::get(self.as_slice(), name)
    }
}

impl<T: Properties + ?Sized> Properties for &T {
    fn get(&self, name: &str) -> Option<&str> {
        Properties::get(*self, name)
    }
}

/// What kind of mistake a [`SqlError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SqlErrorKind {
    /// A character that starts no token, an unterminated string or `/*` comment.
    Lexical,
    /// Tokens in an order the grammar does not allow, an empty expression, trailing tokens.
    Syntax,
    /// An integer literal beyond 64 bits, a float literal that is infinite or zero.
    NumberRange,
    /// Well-formed, but refused by RocketMQ's checks: an operand that cannot be compared, a
    /// value that is not a condition, `IN` without a property, `BETWEEN` bounds out of order.
    Invalid,
    /// Longer than [`MAX_EXPRESSION_BYTES`].
    TooLong,
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// An `IN` list longer than [`MAX_IN_ITEMS`].
    TooManyInItems,
}

/// A compile error: what was wrong and where.
///
/// `position` is a 0-based offset in characters (Unicode scalar values, not bytes) into the
/// expression; `Display` shows it 1-based as "column", e.g.
/// `SQL92 expression 'a >' : expected a value after '>' at column 4`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SQL92 expression '{expression}' : {message} at column {}", .position + 1)]
pub struct SqlError {
    /// What kind of mistake.
    pub kind: SqlErrorKind,
    /// What was wrong, in words.
    pub message: String,
    /// Where: a 0-based character offset into the expression.
    pub position: usize,
    /// The expression, clipped to its first 256 bytes (with "..." when clipped).
    pub expression: String,
}

impl SqlError {
    fn new(kind: SqlErrorKind, src: &str, byte_pos: usize, message: String) -> SqlError {
        let position = src.get(..byte_pos).unwrap_or(src).chars().count();
        let clipped = crate::clip(src, 256);
        let expression =
            if clipped.len() < src.len() { format!("{clipped}...") } else { clipped.to_string() };
        SqlError { kind, message, position, expression }
    }
}

/// A compiled SQL92 expression. Cheap to evaluate: properties are looked up through
/// [`Properties`], and a property string is parsed as a number only when a comparison needs it.
#[derive(Debug, Clone)]
pub struct SqlExpression {
    text: String,
    root: Expr,
}

impl SqlExpression {
    /// Compiles `text`, as RocketMQ's `SqlFilter.compile` does (with the deviations listed in
    /// the [module docs](crate::filter)).
    pub fn compile(text: &str) -> Result<SqlExpression, SqlError> {
        if text.len() > MAX_EXPRESSION_BYTES {
            let cut = crate::clip(text, MAX_EXPRESSION_BYTES).len();
            return Err(SqlError::new(
                SqlErrorKind::TooLong,
                text,
                cut,
                format!(
                    "expression is {} bytes long, more than the {MAX_EXPRESSION_BYTES} allowed",
                    text.len()
                ),
            ));
        }
        let tokens = lex(text)?;
        let eof = Token { tok: Tok::Eof, start: text.len(), end: text.len() };
        let mut parser = Parser { src: text, tokens, eof, i: 0, nesting: 0 };
        let root = parser.selector()?;
        Ok(SqlExpression { text: text.to_string(), root })
    }

    /// RocketMQ's `evaluate(context)` then `ret instanceof Boolean && (Boolean) ret`: true only
    /// when the expression evaluates to TRUE; unknown (null) and evaluation errors are false.
    pub fn matches(&self, props: &dyn Properties) -> bool {
        matches!(self.evaluate(props), Ok(Some(true)))
    }

    /// The expression as compiled.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Three-valued result: `Ok(None)` is unknown, `Err` is where Java would throw.
    fn evaluate(&self, props: &dyn Properties) -> Result<Option<bool>, Fault> {
        self.root.eval_bool(props)
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    Contains,
    StartsWith,
    EndsWith,
    Decimal,
    Float,
    Str(String),
    Id,
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    Comma,
    RParen,
    Plus,
    Minus,
    Eof,
}

const KEYWORDS: [(&str, Tok); 12] = [
    ("NOT", Tok::Not),
    ("AND", Tok::And),
    ("OR", Tok::Or),
    ("BETWEEN", Tok::Between),
    ("IN", Tok::In),
    ("TRUE", Tok::True),
    ("FALSE", Tok::False),
    ("NULL", Tok::Null),
    ("IS", Tok::Is),
    ("CONTAINS", Tok::Contains),
    ("STARTSWITH", Tok::StartsWith),
    ("ENDSWITH", Tok::EndsWith),
];

/// A token and its byte range in the source.
#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

fn byte_at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

fn is_id_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$'
}

fn is_id_part(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

/// The end of `E [+-] digits` starting at `i`, if there is a complete exponent there.
fn exponent_end(b: &[u8], i: usize) -> Option<usize> {
    if !matches!(byte_at(b, i), b'e' | b'E') {
        return None;
    }
    let mut j = i + 1;
    if matches!(byte_at(b, j), b'+' | b'-') {
        j += 1;
    }
    if !is_digit(byte_at(b, j)) {
        return None;
    }
    while is_digit(byte_at(b, j)) {
        j += 1;
    }
    Some(j)
}

/// Splits `src` into tokens as RocketMQ's JavaCC token manager does (longest match, keywords
/// before identifiers). Everything but string contents and comments is ASCII.
fn lex(src: &str) -> Result<Vec<Token>, SqlError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let start = i;
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0C => {
                i += 1;
                continue;
            }
            b'-' if byte_at(b, i + 1) == b'-' => {
                // A line comment, to the line break or the end of the input (RocketMQ needs the
                // line break, else the dashes are minus signs; see the module docs).
                i = match b.iter().skip(i + 2).position(|&x| x == b'\n' || x == b'\r') {
                    Some(off) => i + 2 + off + 1,
                    None => b.len(),
                };
                continue;
            }
            b'/' if byte_at(b, i + 1) == b'*' => {
                let body = b.get(i + 2..).unwrap_or(&[]);
                match body.windows(2).position(|w| w == b"*/") {
                    Some(off) => {
                        i += 2 + off + 2;
                        continue;
                    }
                    None => {
                        return Err(SqlError::new(
                            SqlErrorKind::Lexical,
                            src,
                            start,
                            "unterminated /* comment".to_string(),
                        ));
                    }
                }
            }
            b'\'' => {
                let mut value = String::new();
                let mut seg = i + 1;
                let mut j = i + 1;
                loop {
                    match b.get(j) {
                        None => {
                            return Err(SqlError::new(
                                SqlErrorKind::Lexical,
                                src,
                                start,
                                "unterminated string literal".to_string(),
                            ));
                        }
                        Some(b'\'') => {
                            value.push_str(src.get(seg..j).unwrap_or(""));
                            if byte_at(b, j + 1) == b'\'' {
                                value.push('\'');
                                j += 2;
                                seg = j;
                            } else {
                                j += 1;
                                break;
                            }
                        }
                        Some(_) => j += 1,
                    }
                }
                i = j;
                Tok::Str(value)
            }
            c if is_id_start(c) => {
                let mut j = i + 1;
                while is_id_part(byte_at(b, j)) {
                    j += 1;
                }
                let word = src.get(i..j).unwrap_or("");
                i = j;
                KEYWORDS
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(word))
                    .map_or(Tok::Id, |(_, t)| t.clone())
            }
            c if is_digit(c) => {
                let mut j = i;
                while is_digit(byte_at(b, j)) {
                    j += 1;
                }
                // FLOATING_POINT_LITERAL: digits '.' digits* [exp] | digits exp
                let float_end = if byte_at(b, j) == b'.' {
                    let mut k = j + 1;
                    while is_digit(byte_at(b, k)) {
                        k += 1;
                    }
                    Some(exponent_end(b, k).unwrap_or(k))
                } else {
                    exponent_end(b, j)
                };
                // DECIMAL_LITERAL: "0" | [1-9][0-9]* [lL]
                let decimal_end = if c == b'0' {
                    i + 1
                } else if matches!(byte_at(b, j), b'l' | b'L') {
                    j + 1
                } else {
                    j
                };
                match float_end {
                    Some(f) if f > decimal_end => {
                        i = f;
                        Tok::Float
                    }
                    _ => {
                        i = decimal_end;
                        Tok::Decimal
                    }
                }
            }
            b'.' if is_digit(byte_at(b, i + 1)) => {
                let mut k = i + 1;
                while is_digit(byte_at(b, k)) {
                    k += 1;
                }
                i = exponent_end(b, k).unwrap_or(k);
                Tok::Float
            }
            b'=' => {
                i += 1;
                Tok::Eq
            }
            b'<' => match byte_at(b, i + 1) {
                b'>' => {
                    i += 2;
                    Tok::Ne
                }
                b'=' => {
                    i += 2;
                    Tok::Le
                }
                _ => {
                    i += 1;
                    Tok::Lt
                }
            },
            b'>' => {
                if byte_at(b, i + 1) == b'=' {
                    i += 2;
                    Tok::Ge
                } else {
                    i += 1;
                    Tok::Gt
                }
            }
            b'(' | b')' | b',' | b'+' | b'-' => {
                i += 1;
                match c {
                    b'(' => Tok::LParen,
                    b')' => Tok::RParen,
                    b',' => Tok::Comma,
                    b'+' => Tok::Plus,
                    _ => Tok::Minus,
                }
            }
            _ => {
                let ch = src.get(i..).and_then(|s| s.chars().next()).unwrap_or('\u{FFFD}');
                return Err(SqlError::new(
                    SqlErrorKind::Lexical,
                    src,
                    start,
                    format!("unexpected character {ch:?}"),
                ));
            }
        };
        out.push(Token { tok, start, end: i });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Compiled tree
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Const {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(Box<str>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl CmpOp {
    fn test(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Le => ord != Ordering::Greater,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MatchOp {
    Contains,
    StartsWith,
    EndsWith,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    /// A literal; `TRUE`, `FALSE` and `NULL` are also conditions (`BooleanConstantExpression`).
    Const(Const),
    /// A property's value.
    Prop(Box<str>),
    /// Unary minus.
    Negate(Box<Expr>),
    /// A bare property used as a condition (`UnaryExpression.createBooleanCast`).
    BoolCast(Box<str>),
    Not(Box<Expr>),
    /// A flattened chain of `AND`s, evaluated left to right.
    And(Vec<Expr>),
    /// A flattened chain of `OR`s, evaluated left to right.
    Or(Vec<Expr>),
    /// `ComparisonExpression.doCreateEqual`; `IS NULL` is `Eq(x, Const(Null))`.
    Eq(Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// `value >= low AND value <= high`, or with `not` `value < low OR value > high`; `value` is
    /// evaluated once (pure, so the same as Java evaluating it twice).
    Between {
        value: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        not: bool,
    },
    /// `name [NOT] IN (items)`; `items` sorted for binary search.
    In {
        name: Box<str>,
        items: Box<[Box<str>]>,
        not: bool,
    },
    /// `left [NOT] CONTAINS|STARTSWITH|ENDSWITH search`.
    Match {
        op: MatchOp,
        not: bool,
        left: Box<Expr>,
        search: Box<str>,
    },
}

impl Expr {
    /// Whether RocketMQ's object is a `BooleanExpression`.
    fn is_condition(&self) -> bool {
        !matches!(
            self,
            Expr::Const(Const::Int(_) | Const::Long(_) | Const::Double(_) | Const::Str(_))
                | Expr::Prop(_)
                | Expr::Negate(_)
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

/// A subtree while parsing: its height and where its source text starts and ends (bytes).
struct Node {
    expr: Expr,
    depth: usize,
    start: usize,
    end: usize,
}

struct Parser<'s> {
    src: &'s str,
    tokens: Vec<Token>,
    eof: Token,
    i: usize,
    /// Parentheses, NOT and signs currently open.
    nesting: usize,
}

type PResult<T> = Result<T, SqlError>;

impl Parser<'_> {
    fn peek(&self) -> &Token {
        self.tokens.get(self.i).unwrap_or(&self.eof)
    }

    fn peek2(&self) -> &Token {
        self.tokens.get(self.i + 1).unwrap_or(&self.eof)
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.tokens.len() {
            self.i += 1;
        }
        t
    }

    fn error(&self, kind: SqlErrorKind, byte_pos: usize, message: String) -> SqlError {
        SqlError::new(kind, self.src, byte_pos, message)
    }

    /// Source text between two byte offsets, clipped for messages.
    fn text(&self, start: usize, end: usize) -> String {
        let s = self.src.get(start..end).unwrap_or("");
        let c = crate::clip(s, 60);
        if c.len() < s.len() { format!("{c}...") } else { c.to_string() }
    }

    fn describe(&self, t: &Token) -> String {
        match t.tok {
            Tok::Eof => "the end of the expression".to_string(),
            _ => format!("'{}'", self.text(t.start, t.end)),
        }
    }

    fn node_text(&self, n: &Node) -> String {
        self.text(n.start, n.end)
    }

    fn enter(&mut self, at: &Token) -> PResult<()> {
        self.nesting += 1;
        if self.nesting > MAX_DEPTH {
            return Err(self.error(
                SqlErrorKind::TooDeep,
                at.start,
                format!("expression nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
    }

    /// A node over `children` (height one more than theirs), refused beyond `MAX_DEPTH`.
    fn node(&self, expr: Expr, child_depth: usize, start: usize, end: usize, at: usize) -> PResult<Node> {
        let depth = child_depth + 1;
        if depth > MAX_DEPTH {
            return Err(self.error(
                SqlErrorKind::TooDeep,
                at,
                format!("expression nests deeper than {MAX_DEPTH} levels (chained operators)"),
            ));
        }
        Ok(Node { expr, depth, start, end })
    }

    fn expect(&mut self, want: &Tok, what: &str) -> PResult<Token> {
        if &self.peek().tok == want {
            Ok(self.bump())
        } else {
            let t = self.peek();
            Err(self.error(
                SqlErrorKind::Syntax,
                t.start,
                format!("expected {what}, found {}", self.describe(t)),
            ))
        }
    }

    fn selector(&mut self) -> PResult<Expr> {
        if self.tokens.is_empty() {
            return Err(self.error(SqlErrorKind::Syntax, self.src.len(), "empty expression".to_string()));
        }
        let n = self.or()?;
        let n = self.condition(n)?;
        let t = self.peek();
        if t.tok != Tok::Eof {
            return Err(self.error(
                SqlErrorKind::Syntax,
                t.start,
                format!("unexpected {} after the end of the expression", self.describe(t)),
            ));
        }
        Ok(n.expr)
    }

    /// RocketMQ's `asBooleanExpression`.
    fn condition(&self, n: Node) -> PResult<Node> {
        match n.expr {
            Expr::Prop(name) => Ok(Node { expr: Expr::BoolCast(name), depth: 0, start: n.start, end: n.end }),
            ref e if e.is_condition() => Ok(n),
            _ => Err(self.error(
                SqlErrorKind::Invalid,
                n.start,
                format!(
                    "'{}' is not a condition (it will not result in a boolean value)",
                    self.node_text(&n)
                ),
            )),
        }
    }

    fn logic(&self, is_and: bool, left: Node, right: Node, at: usize) -> PResult<Node> {
        let (start, end) = (left.start, right.end);
        let (expr, child_depth) = match (is_and, left.expr) {
            (true, Expr::And(mut v)) => {
                v.push(right.expr);
                (Expr::And(v), left.depth.saturating_sub(1).max(right.depth))
            }
            (false, Expr::Or(mut v)) => {
                v.push(right.expr);
                (Expr::Or(v), left.depth.saturating_sub(1).max(right.depth))
            }
            (true, l) => (Expr::And(vec![l, right.expr]), left.depth.max(right.depth)),
            (false, l) => (Expr::Or(vec![l, right.expr]), left.depth.max(right.depth)),
        };
        self.node(expr, child_depth, start, end, at)
    }

    fn or(&mut self) -> PResult<Node> {
        let mut left = self.and()?;
        while self.peek().tok == Tok::Or {
            let op = self.bump();
            let right = self.and()?;
            let l = self.condition(left)?;
            let r = self.condition(right)?;
            left = self.logic(false, l, r, op.start)?;
        }
        Ok(left)
    }

    fn and(&mut self) -> PResult<Node> {
        let mut left = self.equality()?;
        while self.peek().tok == Tok::And {
            let op = self.bump();
            let right = self.equality()?;
            let l = self.condition(left)?;
            let r = self.condition(right)?;
            left = self.logic(true, l, r, op.start)?;
        }
        Ok(left)
    }

    /// `ComparisonExpression.checkEqualOperand`: no NULL literal.
    fn check_equal_operand(&self, n: &Node) -> PResult<()> {
        if n.expr == Expr::Const(Const::Null) {
            return Err(self.error(
                SqlErrorKind::Invalid,
                n.start,
                "NULL cannot be compared with = or <>; use IS NULL or IS NOT NULL".to_string(),
            ));
        }
        Ok(())
    }

    /// `ComparisonExpression.createEqual`.
    fn equal(&self, left: Node, right: Node, at: usize) -> PResult<Node> {
        self.check_equal_operand(&left)?;
        self.check_equal_operand(&right)?;
        if let (Expr::Const(Const::Bool(_)), Expr::Const(r)) = (&left.expr, &right.expr) {
            if !matches!(r, Const::Bool(_)) {
                return Err(self.error(
                    SqlErrorKind::Invalid,
                    left.start,
                    format!(
                        "'{}' cannot be compared with '{}'",
                        self.node_text(&left),
                        self.node_text(&right)
                    ),
                ));
            }
        }
        let (start, end, d) = (left.start, right.end, left.depth.max(right.depth));
        self.node(Expr::Eq(Box::new(left.expr), Box::new(right.expr)), d, start, end, at)
    }

    fn not(&self, n: Node, start: usize, at: usize) -> PResult<Node> {
        let (end, d) = (n.end, n.depth);
        self.node(Expr::Not(Box::new(n.expr)), d, start, end, at)
    }

    fn is_null(&self, n: Node, end: usize, at: usize) -> PResult<Node> {
        let (start, d) = (n.start, n.depth);
        self.node(Expr::Eq(Box::new(n.expr), Box::new(Expr::Const(Const::Null))), d, start, end, at)
    }

    fn equality(&mut self) -> PResult<Node> {
        let mut left = self.comparison()?;
        loop {
            match self.peek().tok {
                Tok::Eq => {
                    let op = self.bump();
                    let right = self.comparison()?;
                    left = self.equal(left, right, op.start)?;
                }
                Tok::Ne => {
                    let op = self.bump();
                    let right = self.comparison()?;
                    let start = left.start;
                    let eq = self.equal(left, right, op.start)?;
                    left = self.not(eq, start, op.start)?;
                }
                Tok::Is => {
                    let op = self.bump();
                    if self.peek().tok == Tok::Null {
                        let null = self.bump();
                        left = self.is_null(left, null.end, op.start)?;
                    } else {
                        self.expect(&Tok::Not, "NULL or NOT NULL after IS")?;
                        let null = self.expect(&Tok::Null, "NULL after IS NOT")?;
                        let start = left.start;
                        let eq = self.is_null(left, null.end, op.start)?;
                        left = self.not(eq, start, op.start)?;
                    }
                }
                _ => return Ok(left),
            }
        }
    }

    /// `ComparisonExpression.checkLessThanOperand`: only numbers, properties and negations.
    fn check_less_than_operand(&self, n: &Node) -> PResult<()> {
        match &n.expr {
            Expr::Const(Const::Int(_) | Const::Long(_) | Const::Double(_))
            | Expr::Prop(_)
            | Expr::Negate(_) => Ok(()),
            Expr::Const(_) => Err(self.error(
                SqlErrorKind::Invalid,
                n.start,
                format!(
                    "'{}' cannot be compared with >, >=, <, <= or BETWEEN: only numbers and properties can",
                    self.node_text(n)
                ),
            )),
            _ => Err(self.error(
                SqlErrorKind::Invalid,
                n.start,
                format!(
                    "'{}' is a condition and cannot be compared with >, >=, <, <= or BETWEEN",
                    self.node_text(n)
                ),
            )),
        }
    }

    fn string(&mut self, after: &str) -> PResult<(Box<str>, Token)> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Str(ref s) => {
                let s: Box<str> = s.as_str().into();
                self.bump();
                Ok((s, t))
            }
            _ => Err(self.error(
                SqlErrorKind::Syntax,
                t.start,
                format!("expected a string literal after {after}, found {}", self.describe(&t)),
            )),
        }
    }

    fn comparison(&mut self) -> PResult<Node> {
        let mut left = self.unary()?;
        loop {
            let t = self.peek().clone();
            let (not, op_tok) = match t.tok {
                Tok::Gt | Tok::Ge | Tok::Lt | Tok::Le => {
                    self.bump();
                    let op = match t.tok {
                        Tok::Gt => CmpOp::Gt,
                        Tok::Ge => CmpOp::Ge,
                        Tok::Lt => CmpOp::Lt,
                        _ => CmpOp::Le,
                    };
                    let right = self.unary()?;
                    self.check_less_than_operand(&left)?;
                    self.check_less_than_operand(&right)?;
                    let (start, end, d) = (left.start, right.end, left.depth.max(right.depth));
                    left = self.node(
                        Expr::Cmp(op, Box::new(left.expr), Box::new(right.expr)),
                        d,
                        start,
                        end,
                        t.start,
                    )?;
                    continue;
                }
                Tok::Not => {
                    let next = self.peek2().clone();
                    match next.tok {
                        Tok::Between | Tok::In | Tok::Contains | Tok::StartsWith | Tok::EndsWith => {
                            self.bump();
                            self.bump();
                            (true, next)
                        }
                        _ => {
                            return Err(self.error(
                                SqlErrorKind::Syntax,
                                next.start,
                                format!(
                                    "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT, found {}",
                                    self.describe(&next)
                                ),
                            ));
                        }
                    }
                }
                Tok::Between | Tok::In | Tok::Contains | Tok::StartsWith | Tok::EndsWith => {
                    self.bump();
                    (false, t.clone())
                }
                _ => return Ok(left),
            };
            let kw = if not { "NOT " } else { "" };
            left = match op_tok.tok {
                Tok::Between => self.between(left, not, t.start)?,
                Tok::In => self.in_list(left, not, kw)?,
                _ => {
                    let (op, name) = match op_tok.tok {
                        Tok::Contains => (MatchOp::Contains, "CONTAINS"),
                        Tok::StartsWith => (MatchOp::StartsWith, "STARTSWITH"),
                        _ => (MatchOp::EndsWith, "ENDSWITH"),
                    };
                    let (search, st) = self.string(&format!("{kw}{name}"))?;
                    let (start, d) = (left.start, left.depth);
                    let expr = Expr::Match { op, not, left: Box::new(left.expr), search };
                    self.node(expr, d, start, st.end, t.start)?
                }
            };
        }
    }

    /// `createBetween` / `createNotBetween`.
    fn between(&mut self, value: Node, not: bool, at: usize) -> PResult<Node> {
        let low = self.unary()?;
        self.expect(&Tok::And, "AND between the BETWEEN bounds")?;
        let high = self.unary()?;
        if !not {
            if let (Expr::Const(lo), Expr::Const(hi)) = (&low.expr, &high.expr) {
                self.check_between_bounds(lo, hi, &low, &high)?;
            }
        }
        for n in [&value, &low, &value, &high] {
            self.check_less_than_operand(n)?;
        }
        let (start, end) = (value.start, high.end);
        let d = value.depth.max(low.depth).max(high.depth);
        let expr = Expr::Between {
            value: Box::new(value.expr),
            low: Box::new(low.expr),
            high: Box::new(high.expr),
            not,
        };
        self.node(expr, d, start, end, at)
    }

    /// RocketMQ's check of two literal `BETWEEN` bounds.
    fn check_between_bounds(&self, lo: &Const, hi: &Const, low: &Node, high: &Node) -> PResult<()> {
        let (Some(lv), Some(hv)) = (lo.value(), hi.value()) else {
            return Err(self.error(
                SqlErrorKind::Invalid,
                low.start,
                "BETWEEN bounds cannot be NULL".to_string(),
            ));
        };
        match java_compare(hv, lv) {
            Err(Fault) => Err(self.error(
                SqlErrorKind::Invalid,
                low.start,
                format!(
                    "BETWEEN bounds '{}' and '{}' cannot be compared",
                    self.node_text(low),
                    self.node_text(high)
                ),
            )),
            Ok(Ordering::Less) => Err(self.error(
                SqlErrorKind::Invalid,
                low.start,
                format!(
                    "BETWEEN low bound '{}' must be less than or equal to high bound '{}'",
                    self.node_text(low),
                    self.node_text(high)
                ),
            )),
            Ok(_) => Ok(()),
        }
    }

    /// `createInFilter` / `createNotInFilter`.
    fn in_list(&mut self, left: Node, not: bool, kw: &str) -> PResult<Node> {
        self.expect(&Tok::LParen, &format!("'(' after {kw}IN"))?;
        let mut items = Vec::new();
        let (first, _) = self.string(&format!("{kw}IN ("))?;
        items.push(first);
        while self.peek().tok == Tok::Comma {
            self.bump();
            let (s, st) = self.string("',' in the IN list")?;
            if items.len() >= MAX_IN_ITEMS {
                return Err(self.error(
                    SqlErrorKind::TooManyInItems,
                    st.start,
                    format!("IN list has more than {MAX_IN_ITEMS} items"),
                ));
            }
            items.push(s);
        }
        let close = self.expect(&Tok::RParen, "',' or ')' in the IN list")?;
        let Expr::Prop(name) = left.expr else {
            return Err(self.error(
                SqlErrorKind::Invalid,
                left.start,
                format!("{kw}IN needs a property on its left, got '{}'", self.node_text(&left)),
            ));
        };
        items.sort_unstable();
        items.dedup();
        let expr = Expr::In { name, items: items.into_boxed_slice(), not };
        Ok(Node { expr, depth: 0, start: left.start, end: close.end })
    }

    fn unary(&mut self) -> PResult<Node> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Plus | Tok::Minus | Tok::Not => {
                self.enter(&t)?;
                self.bump();
                let operand = self.unary()?;
                self.leave();
                match t.tok {
                    Tok::Plus => Ok(Node { start: t.start, ..operand }),
                    Tok::Minus => {
                        let (end, d) = (operand.end, operand.depth);
                        self.node(Expr::Negate(Box::new(operand.expr)), d, t.start, end, t.start)
                    }
                    _ => {
                        let c = self.condition(operand)?;
                        self.not(c, t.start, t.start)
                    }
                }
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> PResult<Node> {
        let t = self.peek().clone();
        let leaf = |expr| Ok(Node { expr, depth: 0, start: t.start, end: t.end });
        match t.tok {
            Tok::Str(ref s) => {
                self.bump();
                leaf(Expr::Const(Const::Str(s.as_str().into())))
            }
            Tok::Decimal => {
                self.bump();
                leaf(Expr::Const(self.decimal(&t)?))
            }
            Tok::Float => {
                self.bump();
                leaf(Expr::Const(self.float(&t)?))
            }
            Tok::True | Tok::False => {
                self.bump();
                leaf(Expr::Const(Const::Bool(t.tok == Tok::True)))
            }
            Tok::Null => {
                self.bump();
                leaf(Expr::Const(Const::Null))
            }
            Tok::Id => {
                self.bump();
                leaf(Expr::Prop(self.src.get(t.start..t.end).unwrap_or("").into()))
            }
            Tok::LParen => {
                self.enter(&t)?;
                self.bump();
                let inner = self.or()?;
                let close = self.expect(&Tok::RParen, "')'")?;
                self.leave();
                Ok(Node { start: t.start, end: close.end, ..inner })
            }
            _ => {
                let msg = match self.i.checked_sub(1).and_then(|p| self.tokens.get(p)) {
                    Some(prev) if t.tok == Tok::Eof => {
                        format!("expected a value after '{}'", self.text(prev.start, prev.end))
                    }
                    Some(prev) => format!(
                        "expected a value after '{}', found {}",
                        self.text(prev.start, prev.end),
                        self.describe(&t)
                    ),
                    None => format!("expected a value, found {}", self.describe(&t)),
                };
                Err(self.error(SqlErrorKind::Syntax, t.start, msg))
            }
        }
    }

    /// `ConstantExpression.createFromDecimal`: a `Long`, narrowed to `Integer` when it fits.
    fn decimal(&self, t: &Token) -> PResult<Const> {
        let text = self.src.get(t.start..t.end).unwrap_or("");
        let digits = text.trim_end_matches(['l', 'L']);
        match digits.parse::<i64>() {
            Ok(v) => Ok(i32::try_from(v).map_or(Const::Long(v), Const::Int)),
            Err(_) => Err(self.error(
                SqlErrorKind::NumberRange,
                t.start,
                format!("integer literal {} does not fit in a 64-bit long", self.text(t.start, t.end)),
            )),
        }
    }

    /// `ConstantExpression.createFloat`, range checks included.
    fn float(&self, t: &Token) -> PResult<Const> {
        let text = self.src.get(t.start..t.end).unwrap_or("");
        let shown = self.text(t.start, t.end);
        let range = |msg: String| Err(self.error(SqlErrorKind::NumberRange, t.start, msg));
        match text.parse::<f64>() {
            Err(_) => range(format!("invalid float literal {shown}")),
            Ok(v) if v > f64::MAX => range(format!(
                "float literal {shown} is greater than 1.7976931348623157E308 (Double.MAX_VALUE)"
            )),
            Ok(v) if v < f64::from_bits(1) => range(format!(
                "float literal {shown} is less than 4.9E-324 (Double.MIN_VALUE); RocketMQ rejects zero \
                 float literals, write 0"
            )),
            Ok(v) => Ok(Const::Double(v)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

/// A runtime value; strings borrow from the expression or from the message's properties.
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(&'a str),
}

/// An evaluation failure, where Java throws: the message does not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fault;

type Eval<'a> = Result<Option<Val<'a>>, Fault>;

impl Const {
    fn value(&self) -> Option<Val<'_>> {
        match self {
            Const::Null => None,
            Const::Bool(b) => Some(Val::Bool(*b)),
            Const::Int(i) => Some(Val::Int(*i)),
            Const::Long(l) => Some(Val::Long(*l)),
            Const::Double(d) => Some(Val::Double(*d)),
            Const::Str(s) => Some(Val::Str(s)),
        }
    }
}

fn truth<'a>(b: bool) -> Eval<'a> {
    Ok(Some(Val::Bool(b)))
}

impl Expr {
    fn eval<'a>(&'a self, p: &'a dyn Properties) -> Eval<'a> {
        match self {
            Expr::Const(c) => Ok(c.value()),
            Expr::Prop(name) => Ok(p.get(name).map(Val::Str)),
            Expr::Negate(x) => Ok(match x.eval(p)? {
                Some(Val::Int(i)) => Some(Val::Int(i.wrapping_neg())),
                Some(Val::Long(l)) => Some(Val::Long(l.wrapping_neg())),
                Some(Val::Double(d)) => Some(Val::Double(-d)),
                _ => None,
            }),
            // A property is a String, never a Boolean: FALSE when present.
            Expr::BoolCast(name) => Ok(p.get(name).map(|_| Val::Bool(false))),
            Expr::Not(x) => Ok(x.eval_bool(p)?.map(|b| Val::Bool(!b))),
            Expr::And(xs) => {
                let mut unknown = false;
                for x in xs {
                    match x.eval_bool(p)? {
                        Some(false) => return truth(false),
                        None => unknown = true,
                        Some(true) => {}
                    }
                }
                if unknown { Ok(None) } else { truth(true) }
            }
            Expr::Or(xs) => {
                let mut unknown = false;
                for x in xs {
                    match x.eval_bool(p)? {
                        Some(true) => return truth(true),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                if unknown { Ok(None) } else { truth(false) }
            }
            Expr::Eq(l, r) => {
                let lv = l.eval(p)?;
                let rv = r.eval(p)?;
                match (lv, rv) {
                    (None, None) => truth(true),
                    (None, Some(_)) => Ok(None),
                    (Some(_), None) => truth(false),
                    (Some(a), Some(b)) => truth(java_compare(a, b)? == Ordering::Equal),
                }
            }
            Expr::Cmp(op, l, r) => Ok(compare(*op, l.eval(p)?, r, p)?.map(Val::Bool)),
            Expr::Between { value, low, high, not: false } => {
                let v = value.eval(p)?;
                let ge = compare(CmpOp::Ge, v, low, p)?;
                if ge == Some(false) {
                    return truth(false);
                }
                let le = compare(CmpOp::Le, v, high, p)?;
                if le == Some(false) {
                    return truth(false);
                }
                if ge.is_none() || le.is_none() { Ok(None) } else { truth(true) }
            }
            Expr::Between { value, low, high, not: true } => {
                let v = value.eval(p)?;
                let lt = compare(CmpOp::Lt, v, low, p)?;
                if lt == Some(true) {
                    return truth(true);
                }
                let gt = compare(CmpOp::Gt, v, high, p)?;
                if gt == Some(true) {
                    return truth(true);
                }
                if lt.is_none() || gt.is_none() { Ok(None) } else { truth(false) }
            }
            Expr::In { name, items, not } => Ok(p.get(name).map(|s| {
                let found = items.binary_search_by(|item| (**item).cmp(s)).is_ok();
                Val::Bool(found != *not)
            })),
            Expr::Match { op, not, left, search } => {
                if search.is_empty() {
                    return truth(false);
                }
                match left.eval(p)? {
                    Some(Val::Str(s)) => {
                        let hit = match op {
                            MatchOp::Contains => s.contains(&**search),
                            MatchOp::StartsWith => s.starts_with(&**search),
                            MatchOp::EndsWith => s.ends_with(&**search),
                        };
                        truth(hit != *not)
                    }
                    _ => truth(false),
                }
            }
        }
    }

    /// The value of a condition; anything but a boolean would be a `ClassCastException`.
    fn eval_bool(&self, p: &dyn Properties) -> Result<Option<bool>, Fault> {
        match self.eval(p)? {
            None => Ok(None),
            Some(Val::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(Fault),
        }
    }
}

/// `ComparisonExpression.evaluate` for `>`, `>=`, `<`, `<=` given the evaluated left side: the
/// right side is evaluated only when the left is not null; two strings compare as doubles.
fn compare<'a>(
    op: CmpOp,
    lv: Option<Val<'a>>,
    right: &'a Expr,
    p: &'a dyn Properties,
) -> Result<Option<bool>, Fault> {
    let Some(lv) = lv else { return Ok(None) };
    let Some(rv) = right.eval(p)? else { return Ok(None) };
    let ord = match (lv, rv) {
        (Val::Str(a), Val::Str(b)) => java_double_cmp(java_double(a)?, java_double(b)?),
        _ => java_compare(lv, rv)?,
    };
    Ok(Some(op.test(ord)))
}

/// `ComparisonExpression.__compare` with string conversion on, then `compareTo`. An
/// incompatible pair is "less" (Java's `return -1`); a failed conversion is a `Fault`.
fn java_compare(l: Val<'_>, r: Val<'_>) -> Result<Ordering, Fault> {
    use Val::*;
    Ok(match (l, r) {
        (Bool(a), Bool(b)) => a.cmp(&b),
        (Int(a), Int(b)) => a.cmp(&b),
        (Long(a), Long(b)) => a.cmp(&b),
        (Double(a), Double(b)) => java_double_cmp(a, b),
        (Str(a), Str(b)) => a.encode_utf16().cmp(b.encode_utf16()),
        // Java casts the Boolean to String here: ClassCastException.
        (Bool(_), Str(_)) => return Err(Fault),
        (Bool(_), _) => Ordering::Less,
        (Int(a), Long(b)) => i64::from(a).cmp(&b),
        (Int(a), Double(b)) => java_double_cmp(f64::from(a), b),
        (Int(a), Str(b)) => a.cmp(&java_int(b)?),
        (Long(a), Int(b)) => a.cmp(&i64::from(b)),
        (Long(a), Double(b)) => java_double_cmp(a as f64, b),
        (Long(a), Str(b)) => a.cmp(&java_long(b)?),
        (Double(a), Int(b)) => java_double_cmp(a, f64::from(b)),
        (Double(a), Long(b)) => java_double_cmp(a, b as f64),
        (Double(a), Str(b)) => java_double_cmp(a, java_double(b)?),
        (Int(_) | Long(_) | Double(_), Bool(_)) => Ordering::Less,
        (Str(a), Bool(b)) => java_bool(a).cmp(&b),
        (Str(a), Int(b)) => java_int(a)?.cmp(&b),
        (Str(a), Long(b)) => java_long(a)?.cmp(&b),
        (Str(a), Double(b)) => java_double_cmp(java_double(a)?, b),
    })
}

/// `Double.compare`: numeric order, then bit order with NaN canonical, so NaN is above
/// everything and equal to itself, and -0.0 < 0.0.
fn java_double_cmp(a: f64, b: f64) -> Ordering {
    if a < b {
        Ordering::Less
    } else if a > b {
        Ordering::Greater
    } else {
        let bits = |d: f64| if d.is_nan() { 0x7ff8_0000_0000_0000_i64 } else { d.to_bits() as i64 };
        bits(a).cmp(&bits(b))
    }
}

/// `Boolean.valueOf(String)`.
fn java_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// `Integer.valueOf(String)` (ASCII digits only): optional sign, digits, no whitespace.
fn java_int(s: &str) -> Result<i32, Fault> {
    s.parse().map_err(|_| Fault)
}

/// `Long.valueOf(String)` (ASCII digits only).
fn java_long(s: &str) -> Result<i64, Fault> {
    s.parse().map_err(|_| Fault)
}

/// `Double.valueOf(String)` without hexadecimal floats: trims characters <= ' ', then an
/// optional sign and `NaN`, `Infinity`, or digits with an optional '.', an optional exponent and
/// an optional `f`/`F`/`d`/`D` suffix.
fn java_double(s: &str) -> Result<f64, Fault> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, t.get(1..).unwrap_or("")),
        Some(b'+') => (false, t.get(1..).unwrap_or("")),
        _ => (false, t),
    };
    let magnitude = match body {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        _ => {
            let b = body.as_bytes();
            let mut i = 0;
            let mut digits = 0;
            while is_digit(byte_at(b, i)) {
                i += 1;
                digits += 1;
            }
            if byte_at(b, i) == b'.' {
                i += 1;
                while is_digit(byte_at(b, i)) {
                    i += 1;
                    digits += 1;
                }
            }
            if digits == 0 {
                return Err(Fault);
            }
            if matches!(byte_at(b, i), b'e' | b'E') {
                i = exponent_end(b, i).ok_or(Fault)?;
            }
            let number = body.get(..i).ok_or(Fault)?;
            match b.get(i..) {
                Some([]) | Some([b'f' | b'F' | b'd' | b'D']) => {}
                _ => return Err(Fault),
            }
            number.parse::<f64>().map_err(|_| Fault)?
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A three-valued result, or an evaluation error (where Java throws).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum R {
        T,
        F,
        N,
        E,
    }
    use R::*;

    fn compile(text: &str) -> SqlExpression {
        SqlExpression::compile(text)
            .unwrap_or_else(|e| panic!("{:?} should compile: {e}", crate::clip(text, 200)))
    }

    fn outcome(e: &SqlExpression, props: &dyn Properties) -> R {
        let r = match e.evaluate(props) {
            Ok(Some(true)) => T,
            Ok(Some(false)) => F,
            Ok(None) => N,
            Err(Fault) => E,
        };
        assert_eq!(e.matches(props), r == T, "matches() of {:?}", e.text());
        r
    }

    fn eval(text: &str, props: &[(&str, &str)]) -> R {
        outcome(&compile(text), &props)
    }

    fn err(text: &str) -> SqlError {
        match SqlExpression::compile(text) {
            Ok(e) => panic!("{text:?} should not compile, got {e:?}"),
            Err(e) => e,
        }
    }

    /// Asserts a compile error's kind, position (0-based chars) and part of its message.
    fn assert_err(text: &str, kind: SqlErrorKind, position: usize, message: &str) {
        let e = err(text);
        assert_eq!((e.kind, e.position), (kind, position), "{text:?}: {e}");
        assert!(e.message.contains(message), "{text:?}: {:?} does not contain {message:?}", e.message);
    }

    // ---- ported from RocketMQ's ExpressionTest.java (expected results from the Java test) ----

    const AND_EXPR: &str = "a=3 and b<>4 And c>5 AND d<=4";
    const OR_EXPR: &str = "a=3 or b<>4 Or c>5 OR d<=4";
    const IN_EXPR: &str = "a in ('3', '4', '5')";
    const NOT_IN_EXPR: &str = "a not in ('3', '4', '5')";
    const BETWEEN_EXPR: &str = "a between 2 and 10";
    const NOT_BETWEEN_EXPR: &str = "a not between 2 and 10";

    #[test]
    fn java_evaluate_string_has_string() {
        assert_eq!(eval("TAGS is not null and TAGS='''''tag'''''", &[("TAGS", "''tag''")]), T);
    }

    #[test]
    fn java_evaluate_string_compare() {
        // The Java test expects a RuntimeException: the second case throws it.
        assert_eq!(eval("a between up and low", &[("a", "3.14")]), N);
        assert_eq!(eval("a between up and low", &[("a", "3.14"), ("up", "up"), ("low", "low")]), E);
        // The rest of the Java test is unreachable after that exception; their results here:
        assert_eq!(eval("key is not null and key between 0 and 100", &[("key", "con")]), E);
        assert_eq!(eval("a between 0 and 100", &[("a", "abc")]), E);
        assert_eq!(eval("a=b", &[("a", "3.14"), ("b", "3.14")]), T);
        assert_eq!(eval("a<>b", &[("a", "3.14"), ("b", "3.14")]), F);
        assert_eq!(eval("a<>b", &[("a", "3.14"), ("b", "3.141")]), T);
    }

    #[test]
    fn java_evaluate_numbers() {
        // String.valueOf(3.1415 * Math.pow(10, 10)) is "3.1415E10" in Java.
        assert_eq!(eval("a > 3.1E10", &[("a", "3.1415E10")]), T);
        assert_eq!(eval("a > 3.14", &[("a", "3.1415")]), T);
        assert_eq!(eval("a > b", &[("a", "10"), ("b", "20")]), F);
        assert_eq!(eval("a > b", &[("b", "10"), ("a", "20")]), T);
    }

    #[test]
    fn java_evaluate_null_or_boolean_equal() {
        let null_or = "a is null OR a='hello'";
        assert_eq!(eval(null_or, &[]), T);
        assert_eq!(eval(null_or, &[("a", "hello")]), T);
        assert_eq!(eval(null_or, &[("a", "abc")]), F);
        let boolean = "a=TRUE OR b=FALSE";
        assert_eq!(eval(boolean, &[("a", "true"), ("b", "false")]), T);
        assert_eq!(eval(boolean, &[("a", "false"), ("b", "true")]), F);
        let equal = "a is not null and a='hello'";
        assert_eq!(eval(equal, &[("a", "hello")]), T);
        assert_eq!(eval(equal, &[]), F);
    }

    #[test]
    fn java_evaluate_and_or() {
        // The Java test also runs these with Integer values; properties are strings here.
        assert_eq!(eval(AND_EXPR, &[("a", "3"), ("b", "5"), ("c", "6"), ("d", "1")]), T);
        assert_eq!(eval(AND_EXPR, &[("a", "4"), ("b", "5"), ("c", "6"), ("d", "1")]), F);
        assert_eq!(eval(OR_EXPR, &[("a", "3")]), T);
        assert_eq!(eval(OR_EXPR, &[("a", "4"), ("b", "5")]), T);
        assert_eq!(eval(OR_EXPR, &[("a", "4"), ("b", "4"), ("c", "6")]), T);
        assert_eq!(eval(OR_EXPR, &[("a", "4"), ("b", "4"), ("c", "3"), ("d", "2")]), T);
        assert_eq!(eval(OR_EXPR, &[("a", "4"), ("b", "4"), ("c", "3"), ("d", "10")]), F);
    }

    #[test]
    fn java_evaluate_in_between_null() {
        for v in ["3", "4", "5"] {
            assert_eq!(eval(IN_EXPR, &[("a", v)]), T);
            assert_eq!(eval(NOT_IN_EXPR, &[("a", v)]), F);
        }
        assert_eq!(eval(IN_EXPR, &[("a", "8")]), F);
        assert_eq!(eval(NOT_IN_EXPR, &[("a", "8")]), T);
        for v in ["2", "10", "3"] {
            assert_eq!(eval(BETWEEN_EXPR, &[("a", v)]), T);
            assert_eq!(eval(NOT_BETWEEN_EXPR, &[("a", v)]), F);
        }
        for v in ["1", "11"] {
            assert_eq!(eval(BETWEEN_EXPR, &[("a", v)]), F);
            assert_eq!(eval(NOT_BETWEEN_EXPR, &[("a", v)]), T);
        }
        assert_eq!(eval("a is null", &[("abc", "2")]), T);
        assert_eq!(eval("a is null", &[("a", "2")]), F);
        assert_eq!(eval("a is not null", &[("a", "2")]), T);
        assert_eq!(eval("a is not null", &[("abc", "2")]), F);
    }

    // ---- ported from RocketMQ's ParserTest.java ----

    #[test]
    fn java_parse_valid() {
        for text in [
            AND_EXPR,
            OR_EXPR,
            IN_EXPR,
            "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
            "(a between 2 and 10) AND (b not between 6 and 9)",
            "a is null",
            "a is not null",
            "a <= now",
        ] {
            compile(text);
        }
    }

    #[test]
    fn java_parse_invalid_and_overflow() {
        assert_eq!(err("a and between 2 and 10").kind, SqlErrorKind::Syntax);
        assert_eq!(err("a > 100000000000000000000000").kind, SqlErrorKind::NumberRange);
        // The Java test's float is ~200 KB long: too long here, out of range in Java.
        let mut huge = "1".to_string();
        huge.push_str(&"111111111111111111111111111111111111111111111111111".repeat(2048));
        huge.push('.');
        huge.push_str(&"111111111111111111111111111111111111111111111111111".repeat(2048));
        assert_eq!(err(&format!("a > {huge}")).kind, SqlErrorKind::TooLong);
        let big = format!("a > 1{}.1", "1".repeat(400));
        assert_err(&big, SqlErrorKind::NumberRange, 4, "is greater than 1.7976931348623157E308");
        assert_eq!(err(" a between 10 and 0").kind, SqlErrorKind::Invalid);
    }

    #[test]
    fn java_parse_equals() {
        let e1 = compile(AND_EXPR);
        let e2 = compile("a=3  and    b<>4 And c>5 AND d<=4");
        let e3 = compile(OR_EXPR);
        assert_eq!(e1.root, e2.root);
        assert_ne!(e1.root, e3.root);
    }

    // ---- ported from RocketMQ's LogicExpressionTest.java, plus NOT ----

    #[test]
    fn three_valued_logic_with_literals() {
        let lit = |r: R| match r {
            T => "TRUE",
            F => "FALSE",
            _ => "NULL",
        };
        // left, right, AND, OR  (null = unknown)
        let table = [
            (T, T, T, T),
            (T, F, F, T),
            (T, N, N, T),
            (F, T, F, T),
            (F, F, F, F),
            (F, N, F, N),
            (N, T, N, T),
            (N, F, F, N),
            (N, N, N, N),
        ];
        for (l, r, and, or) in table {
            assert_eq!(eval(&format!("{} AND {}", lit(l), lit(r)), &[]), and, "{l:?} AND {r:?}");
            assert_eq!(eval(&format!("{} OR {}", lit(l), lit(r)), &[]), or, "{l:?} OR {r:?}");
        }
        assert_eq!(eval("NOT TRUE", &[]), F);
        assert_eq!(eval("NOT FALSE", &[]), T);
        assert_eq!(eval("NOT NULL", &[]), N);
    }

    #[test]
    fn three_valued_logic_with_missing_properties() {
        // t = '1' is TRUE, f = '1' is FALSE, m = '1' is unknown (m is missing).
        let props = [("t", "1"), ("f", "0")];
        let cond = |r: R| match r {
            T => "t = '1'",
            F => "f = '1'",
            _ => "m = '1'",
        };
        for l in [T, F, N] {
            for r in [T, F, N] {
                let and = match (l, r) {
                    (F, _) | (_, F) => F,
                    (T, T) => T,
                    _ => N,
                };
                let or = match (l, r) {
                    (T, _) | (_, T) => T,
                    (F, F) => F,
                    _ => N,
                };
                assert_eq!(eval(&format!("{} AND {}", cond(l), cond(r)), &props), and);
                assert_eq!(eval(&format!("{} OR {}", cond(l), cond(r)), &props), or);
                // A chain of three is flattened; same table applied twice.
                let and3 = match (and, r) {
                    (F, _) | (_, F) => F,
                    (T, T) => T,
                    _ => N,
                };
                assert_eq!(eval(&format!("{} AND {} AND {}", cond(l), cond(r), cond(r)), &props), and3);
            }
            let not = match l {
                T => F,
                F => T,
                _ => N,
            };
            assert_eq!(eval(&format!("NOT ({})", cond(l)), &props), not);
        }
    }

    #[test]
    fn short_circuit_skips_errors_like_java() {
        let props = [("e", "x")]; // e > 1 throws (Double.valueOf("x"))
        assert_eq!(eval("e > 1.5", &props), E);
        assert_eq!(eval("FALSE AND e > 1.5", &props), F);
        assert_eq!(eval("e > 1.5 AND FALSE", &props), E);
        assert_eq!(eval("TRUE OR e > 1.5", &props), T);
        assert_eq!(eval("e > 1.5 OR TRUE", &props), E);
        assert_eq!(eval("NULL AND e > 1.5", &props), E);
        assert_eq!(eval("NOT (FALSE AND e > 1.5)", &props), T);
        assert_eq!(eval("NOT (e > 1.5)", &props), E);
        // The right side of a comparison is not evaluated when the left is null.
        assert_eq!(eval("m > -(e > 1)", &props), N);
        assert_eq!(eval("1 > -(e > 1)", &props), E);
    }

    #[test]
    fn missing_properties_in_between_in_and_string_matches() {
        assert_eq!(eval("a BETWEEN 1 AND 5", &[]), N);
        assert_eq!(eval("a NOT BETWEEN 1 AND 5", &[]), N);
        assert_eq!(eval("NOT (a BETWEEN 1 AND 5)", &[]), N);
        assert_eq!(eval("a BETWEEN b AND 5", &[("a", "3")]), N);
        assert_eq!(eval("a BETWEEN b AND 5", &[("a", "9")]), F);
        assert_eq!(eval("a NOT BETWEEN b AND 5", &[("a", "9")]), T);
        assert_eq!(eval("a NOT BETWEEN b AND 5", &[("a", "3")]), N);
        assert_eq!(eval("a IN ('x')", &[]), N);
        assert_eq!(eval("a NOT IN ('x')", &[]), N);
        assert_eq!(eval("NOT (a IN ('x'))", &[]), N);
        // CONTAINS and friends are FALSE, not unknown, on a missing property.
        for op in ["CONTAINS", "STARTSWITH", "ENDSWITH"] {
            assert_eq!(eval(&format!("a {op} 'x'"), &[]), F);
            assert_eq!(eval(&format!("a NOT {op} 'x'"), &[]), F);
            assert_eq!(eval(&format!("NOT (a NOT {op} 'x')"), &[]), T);
            assert_eq!(eval(&format!("a {op} ''"), &[("a", "abc")]), F);
            assert_eq!(eval(&format!("a NOT {op} ''"), &[("a", "abc")]), F);
        }
    }

    #[test]
    fn string_matches() {
        let p = [("a", "abc")];
        assert_eq!(eval("a CONTAINS 'b'", &p), T);
        assert_eq!(eval("a CONTAINS 'x'", &p), F);
        assert_eq!(eval("a NOT CONTAINS 'x'", &p), T);
        assert_eq!(eval("a STARTSWITH 'ab'", &p), T);
        assert_eq!(eval("a STARTSWITH 'bc'", &p), F);
        assert_eq!(eval("a NOT STARTSWITH 'b'", &p), T);
        assert_eq!(eval("a ENDSWITH 'bc'", &p), T);
        assert_eq!(eval("a NOT ENDSWITH 'c'", &p), F);
        assert_eq!(eval("'abc' CONTAINS 'b'", &[]), T);
        // Not a string on the left: FALSE.
        assert_eq!(eval("5 CONTAINS '5'", &[]), F);
        assert_eq!(eval("(a = 'abc') CONTAINS 'true'", &p), F);
        assert_eq!(eval("a CONTAINS 'é✓'", &[("a", "xé✓y")]), T);
    }

    #[test]
    fn null_handling_of_equality_and_casts() {
        assert_eq!(eval("a = b", &[]), T); // both null
        assert_eq!(eval("a = 'x'", &[]), N);
        assert_eq!(eval("'x' = a", &[]), F);
        assert_eq!(eval("'x' <> a", &[]), T);
        assert_eq!(eval("a <> 'x'", &[]), N);
        assert_eq!(eval("a IS NULL", &[]), T);
        assert_eq!(eval("-a IS NULL", &[("a", "5")]), T); // negating a string is null
        // A bare property as a condition: unknown when missing, FALSE when present.
        assert_eq!(eval("a", &[]), N);
        assert_eq!(eval("a", &[("a", "true")]), F);
        assert_eq!(eval("NOT a", &[("a", "true")]), T);
        assert_eq!(eval("NOT a", &[]), N);
        assert_eq!(eval("a OR b = '1'", &[("a", "x"), ("b", "1")]), T);
        // NOT binds tighter than =: (NOT a) = 1 compares a boolean with a number.
        assert_eq!(eval("NOT a = 1", &[("a", "2")]), F);
    }

    #[test]
    fn string_versus_number_comparisons() {
        // Integer literal: Integer.valueOf(property).
        assert_eq!(eval("a > 5", &[("a", "10")]), T);
        assert_eq!(eval("a > 5", &[("a", "+7")]), T);
        assert_eq!(eval("a > 5", &[("a", "007")]), T);
        assert_eq!(eval("a > 5", &[("a", "3")]), F);
        for bad in ["abc", "5.5", " 5", "", "-", "3000000000", "٣"] {
            assert_eq!(eval("a > 5", &[("a", bad)]), E, "{bad:?}");
        }
        assert_eq!(eval("a = 3", &[("a", "3")]), T);
        assert_eq!(eval("a = 5L", &[("a", "5")]), T);
        assert_eq!(eval("a = -5", &[("a", "-5")]), T);
        assert_eq!(eval("5 < a", &[("a", "10")]), T);
        assert_eq!(eval("5 = a", &[("a", "5")]), T);
        // Long literal: Long.valueOf(property).
        assert_eq!(eval("a > 3000000000", &[("a", "5")]), F);
        assert_eq!(eval("a = 2147483648", &[("a", "2147483648")]), T);
        assert_eq!(eval("a > -2147483648", &[("a", "-1")]), T);
        assert_eq!(eval("a > 3000000000", &[("a", "5.5")]), E);
        // Float literal: Double.valueOf(property).
        assert_eq!(eval("a > 5.0", &[("a", "5.5")]), T);
        assert_eq!(eval("a > 5.0", &[("a", " 5.5 ")]), T);
        assert_eq!(eval("a > 5.0", &[("a", "5.5d")]), T);
        assert_eq!(eval("a > 5.0", &[("a", "1e1")]), T);
        assert_eq!(eval("a > 5.0", &[("a", "Infinity")]), T);
        assert_eq!(eval("a > 5.0", &[("a", "-Infinity")]), F);
        assert_eq!(eval("a > 5.0", &[("a", "NaN")]), T); // Double.compare: NaN is greatest
        for bad in ["inf", "0x10", "1e", ".", "5.5.5", "abc", "1_0"] {
            assert_eq!(eval("a > 5.0", &[("a", bad)]), E, "{bad:?}");
        }
        assert_eq!(eval("a = 5.0", &[("a", "5")]), T);
        assert_eq!(eval("a = 5", &[("a", "5.0")]), E);
        // Two strings: doubles under > >= < <=, strings under = <>.
        assert_eq!(eval("a > b", &[("a", "10"), ("b", "9")]), T);
        assert_eq!(eval("a >= b", &[("a", "NaN"), ("b", "NaN")]), T);
        assert_eq!(eval("a > b", &[("a", "x"), ("b", "1")]), E);
        assert_eq!(eval("a = b", &[("a", "1.0"), ("b", "1")]), F);
        // Literals against each other widen.
        assert_eq!(eval("1.5 > 1", &[]), T);
        assert_eq!(eval("3000000000 > 2", &[]), T);
        assert_eq!(eval("-0.5 < 0", &[]), T);
        assert_eq!(eval("-a > 1", &[("a", "5")]), N);
    }

    #[test]
    fn booleans_compare_like_java() {
        assert_eq!(eval("a = TRUE", &[("a", "TRUE")]), T);
        assert_eq!(eval("a = TRUE", &[("a", "yes")]), F);
        assert_eq!(eval("a = FALSE", &[("a", "yes")]), T); // Boolean.valueOf("yes") is false
        assert_eq!(eval("TRUE = a", &[("a", "true")]), E); // ClassCastException in Java
        assert_eq!(eval("1 = TRUE", &[]), F);
        assert_eq!(eval("TRUE = FALSE", &[]), F);
        assert_eq!(eval("(a = '1') = TRUE", &[("a", "1")]), T);
        assert_eq!(eval("(a = '1') <> (b = '1')", &[("a", "1"), ("b", "2")]), T);
    }

    #[test]
    fn keywords_are_case_insensitive_identifiers_are_not() {
        let text = "a Is NoT nUlL aNd b bEtWeEn 1 AnD 3 oR c iN ('x') AnD NoT (d CoNtAiNs 'q') and tRuE";
        assert_eq!(eval(text, &[("a", "1"), ("b", "2"), ("d", "z")]), T);
        assert_eq!(eval("x StartsWith 'a' AND x endswith 'c' AND x NOT between 5 and 6", &[("x", "abc")]), E);
        assert_eq!(eval("A = '1'", &[("a", "1")]), N);
        assert_eq!(
            eval("notes = '1' AND $x_1 = '2' AND _in = '3'", &[("notes", "1"), ("$x_1", "2"), ("_in", "3")]),
            T
        );
    }

    #[test]
    fn string_literal_escapes() {
        assert_eq!(eval("a = 'it''s'", &[("a", "it's")]), T);
        assert_eq!(eval("a = ''''", &[("a", "'")]), T);
        assert_eq!(eval("a = ''", &[("a", "")]), T);
        assert_eq!(eval("a IN ('''', 'x')", &[("a", "'")]), T);
        assert_eq!(eval("a = 'héllo ✓\n'", &[("a", "héllo ✓\n")]), T);
    }

    #[test]
    fn comments_whitespace_and_number_tokens() {
        let p = [("a", "1"), ("b", "2")];
        assert_eq!(eval("a = 1 -- c\n AND b = 2", &p), T);
        assert_eq!(eval("a = 1 -- c\r\nAND b = 2", &p), T);
        assert_eq!(eval("a /* x */ = 1", &p), T);
        assert_eq!(eval("/** x **/ a = 1 /*/ */", &p), T);
        assert_eq!(eval("a = 1 -- a comment that runs to the end", &p), T);
        assert_eq!(eval("a\t=\u{c}1\r\n", &p), T);
        assert_eq!(eval("a = 5l", &[("a", "5")]), T);
        assert_eq!(eval("a > .5 AND a > 0.5e0 AND a < 5. AND a < 5.e2 AND a < 1E+3", &p), T);
        // Longest match, as JavaCC: these leave a trailing token.
        for text in ["a > 5e", "a = 0x10", "a = 010", "a = 0L", "a > 1.5.5", "a > 5abc"] {
            assert_eq!(err(text).kind, SqlErrorKind::Syntax, "{text:?}");
        }
        assert_eq!(compile("a = 1").text(), "a = 1");
    }

    // ---- compile errors: every kind, with message and position ----

    #[test]
    fn error_display_and_position() {
        let e = err("a >");
        assert_eq!(e.to_string(), "SQL92 expression 'a >' : expected a value after '>' at column 4");
        assert_eq!((e.kind, e.position), (SqlErrorKind::Syntax, 3));
        // Positions count characters, not bytes.
        assert_err("x = 'é' AND é", SqlErrorKind::Lexical, 12, "unexpected character 'é'");
        let long = format!("{} !", "a".repeat(1000));
        let e = err(&long);
        assert_eq!(e.position, 1001);
        assert_eq!(e.expression, format!("{}...", "a".repeat(256)));
    }

    #[test]
    fn lexical_errors() {
        use SqlErrorKind::Lexical;
        assert_err("a = 1 ! b", Lexical, 6, "unexpected character '!'");
        assert_err("a != 1", Lexical, 2, "unexpected character '!'");
        assert_err("a = 'abc", Lexical, 4, "unterminated string literal");
        assert_err("a /* x", Lexical, 2, "unterminated /* comment");
        assert_err("a.b = 1", Lexical, 1, "unexpected character '.'");
        assert_err("a = 1;", Lexical, 5, "unexpected character ';'");
        assert_err("a = \"x\"", Lexical, 4, "unexpected character '\"'");
        assert_err("a = 1 / 2", Lexical, 6, "unexpected character '/'");
        assert_err("\u{0} ", Lexical, 0, "unexpected character '\\0'");
    }

    #[test]
    fn syntax_errors() {
        use SqlErrorKind::Syntax;
        assert_err("", Syntax, 0, "empty expression");
        assert_err("   ", Syntax, 3, "empty expression");
        assert_err("-- only a comment\n", Syntax, 18, "empty expression");
        assert_err("a = 1 b", Syntax, 6, "unexpected 'b' after the end of the expression");
        assert_err("(a = 1))", Syntax, 7, "unexpected ')' after the end");
        assert_err("(a = 1", Syntax, 6, "expected ')', found the end of the expression");
        assert_err("a IN 'x'", Syntax, 5, "expected '(' after IN, found ''x''");
        assert_err("a IN ('x' 'y')", Syntax, 10, "expected ',' or ')' in the IN list, found ''y''");
        assert_err("a IN (1)", Syntax, 6, "expected a string literal after IN (, found '1'");
        assert_err("a NOT IN ()", Syntax, 10, "expected a string literal after NOT IN (");
        assert_err("a IN ('x',)", Syntax, 10, "expected a string literal after ','");
        assert_err("a BETWEEN 1 2", Syntax, 12, "expected AND between the BETWEEN bounds, found '2'");
        assert_err("a IS 5", Syntax, 5, "expected NULL or NOT NULL after IS, found '5'");
        assert_err("a IS NOT 5", Syntax, 9, "expected NULL after IS NOT, found '5'");
        assert_err("a NOT b", Syntax, 6, "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT");
        assert_err("a CONTAINS b", Syntax, 11, "expected a string literal after CONTAINS, found 'b'");
        assert_err("a NOT ENDSWITH 1", Syntax, 15, "after NOT ENDSWITH");
        assert_err("a = = 1", Syntax, 4, "expected a value after '=', found '='");
        assert_err("a = 1 AND", Syntax, 9, "expected a value after 'AND'");
        assert_err(") a", Syntax, 0, "expected a value, found ')'");
        assert_err("contains = 'x'", Syntax, 0, "expected a value, found 'contains'");
    }

    #[test]
    fn number_range_errors() {
        use SqlErrorKind::NumberRange;
        assert_err("a > 9223372036854775808", NumberRange, 4, "does not fit in a 64-bit long");
        assert_eq!(eval("a < 9223372036854775807", &[("a", "1")]), T);
        assert_err("a > 1e309", NumberRange, 4, "is greater than 1.7976931348623157E308");
        assert_err("a > 0.0", NumberRange, 4, "is less than 4.9E-324");
        assert_err("a > 1e-400", NumberRange, 4, "is less than 4.9E-324");
        assert_err("a > 0e5", NumberRange, 4, "is less than 4.9E-324");
        assert_eq!(eval("a > 0", &[("a", "1")]), T);
        assert_eq!(eval("a > 4.9e-324", &[("a", "1")]), T);
    }

    #[test]
    fn invalid_operand_errors() {
        use SqlErrorKind::Invalid;
        assert_err("a > 'x'", Invalid, 4, "''x'' cannot be compared with >, >=, <, <= or BETWEEN");
        assert_err("'x' < a", Invalid, 0, "cannot be compared");
        assert_err("a > TRUE", Invalid, 4, "cannot be compared");
        assert_err("a > NULL", Invalid, 4, "cannot be compared");
        assert_err("(a = 1) > 2", Invalid, 0, "'(a = 1)' is a condition");
        assert_err("a BETWEEN 'a' AND 'b'", Invalid, 10, "''a'' cannot be compared");
        assert_err("a BETWEEN 'x' AND 1", Invalid, 10, "BETWEEN bounds ''x'' and '1' cannot be compared");
        assert_err(
            "a BETWEEN 10 AND 0",
            Invalid,
            10,
            "low bound '10' must be less than or equal to high bound '0'",
        );
        assert_err("a BETWEEN 1 AND TRUE", Invalid, 10, "must be less than or equal");
        assert_err("a BETWEEN NULL AND 1", Invalid, 10, "BETWEEN bounds cannot be NULL");
        assert_err("(a = 1) BETWEEN 1 AND 2", Invalid, 0, "is a condition");
        assert_eq!(eval("a NOT BETWEEN 10 AND 0", &[("a", "5")]), T); // not checked, as in RocketMQ
        assert_eq!(eval("a BETWEEN -5 AND -10", &[("a", "-7")]), F); // negations are not literals
        assert_err("NULL = a", Invalid, 0, "NULL cannot be compared with = or <>");
        assert_err("a = NULL", Invalid, 4, "NULL cannot be compared");
        assert_err("a <> NULL", Invalid, 5, "NULL cannot be compared");
        assert_err("TRUE = 1", Invalid, 0, "'TRUE' cannot be compared with '1'");
        assert_err("FALSE <> 'x'", Invalid, 0, "'FALSE' cannot be compared with ''x''");
        assert_err("'x' IN ('x')", Invalid, 0, "IN needs a property on its left, got ''x''");
        assert_err("NOT a IN ('x')", Invalid, 0, "IN needs a property");
        assert_err("a NOT IN ('x') IN ('y')", Invalid, 0, "IN needs a property");
        assert_eq!(eval("(a) IN ('x')", &[("a", "x")]), T);
        assert_err("5", Invalid, 0, "'5' is not a condition");
        assert_err("'abc'", Invalid, 0, "is not a condition");
        assert_err("-a", Invalid, 0, "'-a' is not a condition");
        assert_err("a = 1 AND 5", Invalid, 10, "'5' is not a condition");
        assert_err("5 OR a = 1", Invalid, 0, "'5' is not a condition");
        assert_err("NOT 5", Invalid, 4, "'5' is not a condition");
        assert_eq!(eval("NULL", &[]), N);
        assert_eq!(eval("(TRUE)", &[]), T);
    }

    #[test]
    fn length_limit() {
        let ok = "a".repeat(MAX_EXPRESSION_BYTES);
        assert_eq!(eval(&ok, &[]), N);
        let e = err(&"a".repeat(MAX_EXPRESSION_BYTES + 1));
        assert_eq!((e.kind, e.position), (SqlErrorKind::TooLong, MAX_EXPRESSION_BYTES));
        assert!(e.message.contains("16385 bytes long, more than the 16384 allowed"), "{e}");
        let e = err(&"é".repeat(MAX_EXPRESSION_BYTES));
        assert_eq!((e.kind, e.position), (SqlErrorKind::TooLong, MAX_EXPRESSION_BYTES / 2));
    }

    #[test]
    fn depth_limit() {
        use SqlErrorKind::TooDeep;
        let parens = |n: usize| format!("{}a = '1'{}", "(".repeat(n), ")".repeat(n));
        assert_eq!(eval(&parens(MAX_DEPTH), &[("a", "1")]), T);
        assert_err(&parens(MAX_DEPTH + 1), TooDeep, MAX_DEPTH, "deeper than 64 levels");
        // 64 NOTs over a bare property: 64 levels (the cast of `a` is a leaf).
        let nots = |n: usize| format!("{}a", "NOT ".repeat(n));
        assert_eq!(eval(&nots(MAX_DEPTH), &[("a", "1")]), F);
        assert_eq!(eval(&nots(MAX_DEPTH - 1), &[("a", "1")]), T);
        assert_err(&nots(MAX_DEPTH + 1), TooDeep, 4 * MAX_DEPTH, "deeper than 64 levels");
        // Under `=`, 63 minus signs are the most: the comparison is a level too. (`--` would
        // start a comment.)
        let minus = |n: usize| format!("a = {}1", "- ".repeat(n));
        assert_eq!(eval(&minus(MAX_DEPTH - 1), &[("a", "-1")]), T);
        assert_err(&minus(MAX_DEPTH), TooDeep, 2, "deeper than 64 levels (chained operators)");
        assert_err(&minus(MAX_DEPTH + 1), TooDeep, 4 + 2 * MAX_DEPTH, "deeper");
        assert_eq!(eval(&format!("a = {}1", "+".repeat(MAX_DEPTH)), &[("a", "1")]), T);
        assert_err(&format!("a = {}1", "+".repeat(MAX_DEPTH + 1)), TooDeep, 4 + MAX_DEPTH, "deeper");
        // Chains build deep trees without any parentheses.
        let eqs = |n: usize| format!("a = '1'{}", " = TRUE".repeat(n - 1));
        assert_eq!(eval(&eqs(MAX_DEPTH), &[("a", "1")]), T);
        let e = err(&eqs(MAX_DEPTH + 1));
        assert_eq!((e.kind, e.position), (TooDeep, 8 + 7 * (MAX_DEPTH - 1)), "{e}");
        let nulls = |n: usize| format!("a{}", " IS NULL".repeat(n));
        assert_eq!(eval(&nulls(MAX_DEPTH), &[]), F);
        assert_eq!(err(&nulls(MAX_DEPTH + 1)).kind, TooDeep);
        assert_eq!(err(&format!("a{}", " CONTAINS 'x'".repeat(MAX_DEPTH + 1))).kind, TooDeep);
        assert_eq!(err(&format!("a = '1'{}", " <> TRUE".repeat(MAX_DEPTH))).kind, TooDeep);
        // Mixed nesting within the limit evaluates.
        let mixed = format!("{}a = '1'{}", "NOT (".repeat(32), ")".repeat(32));
        assert_eq!(eval(&mixed, &[("a", "1")]), T);
        // AND/OR chains are flattened: a long chain is not deep.
        let chain = vec!["a = '1'"; 1000].join(" OR ");
        assert_eq!(eval(&format!("{chain} OR b = '2'"), &[("b", "2")]), T);
        let chain = vec!["a = '1'"; 600].join(" AND ");
        assert_eq!(eval(&chain, &[("a", "1")]), T);
        assert_eq!(eval(&format!("({chain}) AND ({chain})"), &[("a", "2")]), F);
        // Hostile nesting is refused quickly, whatever its length.
        assert_eq!(err(&"(".repeat(MAX_EXPRESSION_BYTES)).kind, TooDeep);
        assert_eq!(err(&"NOT ".repeat(MAX_EXPRESSION_BYTES / 4)).kind, TooDeep);
        assert_eq!(err(&"- ".repeat(MAX_EXPRESSION_BYTES / 2)).kind, TooDeep);
        assert_eq!(err(&"+".repeat(MAX_EXPRESSION_BYTES)).kind, TooDeep);
    }

    #[test]
    fn in_list_limit() {
        let list = |n: usize| {
            let items: Vec<String> = (0..n).map(|i| format!("'{i}'")).collect();
            format!("a IN ({})", items.join(","))
        };
        let ok = list(MAX_IN_ITEMS);
        assert_eq!(eval(&ok, &[("a", "1023")]), T);
        assert_eq!(eval(&ok, &[("a", "1024")]), F);
        let e = err(&list(MAX_IN_ITEMS + 1));
        assert_eq!(e.kind, SqlErrorKind::TooManyInItems);
        assert_eq!(e.position, ok.len() - 1 + 1); // the 1025th item, after the last ','
        assert!(e.message.contains("more than 1024 items"));
    }

    #[test]
    fn properties_implementations() {
        fn assert_send_sync_clone<T: Send + Sync + Clone>() {}
        assert_send_sync_clone::<SqlExpression>();
        assert_send_sync_clone::<SqlError>();
        let e = compile("a = '1' AND b IS NULL");
        let mut map: HashMap<String, String> = HashMap::new();
        map.insert("a".into(), "1".into());
        assert!(e.matches(&map));
        let fx: rustc_hash::FxHashMap<String, String> = map.clone().into_iter().collect();
        assert!(e.matches(&fx));
        let bt: BTreeMap<String, String> = map.into_iter().collect();
        assert!(e.matches(&bt));
        assert!(e.matches(&[("a", "1")]));
        assert!(!e.matches(&[("a", "1"), ("b", "")]));
    }

    // ---- property tests ----

    const TOKENS: &[&str] = &[
        "a",
        "b",
        "TAGS",
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "IN",
        "IS",
        "NULL",
        "TRUE",
        "FALSE",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
        "=",
        "<>",
        ">",
        ">=",
        "<",
        "<=",
        "(",
        ")",
        ",",
        "+",
        "-",
        "'x'",
        "'3'",
        "''",
        "0",
        "1",
        "5L",
        "2147483648",
        "9223372036854775808",
        "3.5",
        ".5",
        "1e400",
        "0.0",
        "--c\n",
        "/*c*/",
        "'",
        "!",
        "é",
    ];
    const NAMES: &[&str] = &["a", "b", "c", "TAGS"];
    const VALUES: &[&str] = &[
        "",
        "0",
        "1",
        "5",
        "-5",
        "10",
        "3.14",
        "abc",
        "x",
        "true",
        "TRUE",
        "false",
        "NaN",
        "Infinity",
        "2147483648",
        "9223372036854775808",
        "1e400",
        " 7 ",
        "x'y",
        "''tag''",
        "é",
    ];
    const OPERANDS: &[&str] = &[
        "a",
        "b",
        "c",
        "TAGS",
        "'x'",
        "'1'",
        "1",
        "5",
        "-5",
        "3000000000",
        "3.14",
        "-a",
        "TRUE",
        "FALSE",
        "NULL",
    ];
    const STRINGS: &[&str] = &["'x'", "'1'", "''", "'abc'", "'é'"];

    fn props_strategy() -> impl Strategy<Value = HashMap<String, String>> {
        prop::collection::hash_map(
            prop::sample::select(NAMES).prop_map(String::from),
            prop::sample::select(VALUES).prop_map(String::from),
            0..=NAMES.len(),
        )
    }

    fn condition_strategy() -> impl Strategy<Value = String> {
        let operand = || prop::sample::select(OPERANDS);
        let string = || prop::sample::select(STRINGS);
        let not = |n: bool| if n { "NOT " } else { "" };
        let leaf = prop_oneof![
            (operand(), prop::sample::select(&["=", "<>", ">", ">=", "<", "<="][..]), operand())
                .prop_map(|(a, o, b)| format!("{a} {o} {b}")),
            (prop::sample::select(NAMES), any::<bool>(), prop::collection::vec(string(), 1..4))
                .prop_map(move |(p, n, items)| format!("{p} {}IN ({})", not(n), items.join(", "))),
            (operand(), any::<bool>(), operand(), operand())
                .prop_map(move |(v, n, lo, hi)| format!("{v} {}BETWEEN {lo} AND {hi}", not(n))),
            (operand(), any::<bool>()).prop_map(move |(v, n)| format!("{v} IS {}NULL", not(n))),
            (
                operand(),
                any::<bool>(),
                prop::sample::select(&["CONTAINS", "STARTSWITH", "ENDSWITH"][..]),
                string()
            )
                .prop_map(move |(v, n, op, s)| format!("{v} {}{op} {s}", not(n))),
            prop::sample::select(&["TRUE", "FALSE", "NULL", "a", "b"][..]).prop_map(String::from),
        ];
        leaf.prop_recursive(5, 48, 3, |inner| {
            prop_oneof![
                (inner.clone(), prop::sample::select(&["AND", "OR"][..]), inner.clone())
                    .prop_map(|(a, o, b)| format!("({a}) {o} ({b})")),
                inner.clone().prop_map(|a| format!("NOT ({a})")),
                (inner.clone(), prop::sample::select(&["=", "<>"][..]), inner)
                    .prop_map(|(a, o, b)| format!("({a}) {o} ({b})")),
            ]
        })
    }

    fn and3(l: R, r: R) -> R {
        match (l, r) {
            (E, _) | (F, _) => l,
            (_, E) | (_, F) => r,
            (T, T) => T,
            _ => N,
        }
    }

    fn or3(l: R, r: R) -> R {
        match (l, r) {
            (E, _) | (T, _) => l,
            (_, E) | (_, T) => r,
            (F, F) => F,
            _ => N,
        }
    }

    proptest! {
        #[test]
        fn compile_never_panics_on_any_string(text in any::<String>()) {
            let _ = SqlExpression::compile(&text);
        }

        #[test]
        fn compile_never_panics_on_ascii_noise(text in "[ -~\t\n\r]{0,200}") {
            if let Ok(e) = SqlExpression::compile(&text) {
                let _ = e.matches(&[("a", "1")]);
            }
        }

        #[test]
        fn token_soups_never_panic(
            tokens in prop::collection::vec(prop::sample::select(TOKENS), 0..40),
            props in props_strategy(),
        ) {
            let text = tokens.join(" ");
            if let Ok(e) = SqlExpression::compile(&text) {
                let _ = e.matches(&props);
                let _ = e.clone().matches(&props);
            }
        }

        #[test]
        fn generated_expressions_evaluate_consistently(
            x in condition_strategy(),
            y in condition_strategy(),
            props in props_strategy(),
        ) {
            let (Ok(ex), Ok(ey)) = (SqlExpression::compile(&x), SqlExpression::compile(&y)) else {
                return Ok(());
            };
            let (rx, ry) = (outcome(&ex, &props), outcome(&ey, &props));
            if let Ok(e) = SqlExpression::compile(&format!("NOT ({x})")) {
                let expected = match rx { T => F, F => T, other => other };
                prop_assert_eq!(outcome(&e, &props), expected);
            }
            if let Ok(e) = SqlExpression::compile(&format!("({x}) AND ({y})")) {
                prop_assert_eq!(outcome(&e, &props), and3(rx, ry));
            }
            if let Ok(e) = SqlExpression::compile(&format!("({x}) OR ({y}) OR ({x})")) {
                prop_assert_eq!(outcome(&e, &props), or3(or3(rx, ry), rx));
            }
        }
    }
}
