//! What a client may ask `serve` for, checked field by field: `POST /search`'s JSON body and
//! `GET /search`'s query string become one [`Search`], or an [`ApiError`] that names the field at fault.

use std::collections::HashMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use warpsearch_query::Mode;

/// A refused request: its status, a sentence, and the field at fault (if one is).
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    /// 400: `field` is wrong, as `message` says.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// 429: too many queries are in flight.
    pub fn overloaded(in_flight_limit: usize) -> ApiError {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: format!(
                "the server holds its limit of {in_flight_limit} places of queries in flight (a query \
                 holds one, and more for its terms' postings): retry later"
            ),
            field: None,
        }
    }

    /// 429: the `in_flight` queries would take longer than `deadline` to answer.
    pub fn late(in_flight: usize, deadline: std::time::Duration) -> ApiError {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: format!(
                "the {in_flight} queries in flight would take longer than {:.0} ms to answer: retry later",
                deadline.as_secs_f64() * 1e3
            ),
            field: None,
        }
    }

    /// 500: the engine failed a query.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            field: None,
        }
    }

    /// 413: a body of `length` bytes, said by its Content-Length, above `max`.
    pub fn too_large(length: u64, max: usize) -> ApiError {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "the body is {length} bytes, more than this server's limit of {max} (--max-body): \
                 send fewer queries a request"
            ),
            field: Some("body".into()),
        }
    }

    /// 408: the body did not arrive within `timeout` of the header.
    pub fn slow_body(timeout: std::time::Duration) -> ApiError {
        ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!(
                "the body did not arrive within {:.0} s (--read-timeout)",
                timeout.as_secs_f64()
            ),
            field: Some("body".into()),
        }
    }

    /// The client went away before its answers came: nobody reads this (its connection is closed).
    pub fn gone() -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: GONE.into(),
            field: None,
        }
    }

    /// Whether this is [`ApiError::gone`] (not a refusal to count).
    pub fn is_gone(&self) -> bool {
        self.message == GONE
    }
}

const GONE: &str = "the client went away: its queries not yet started were dropped";

/// The request's Content-Length, if it gives one; a malformed one is refused (400).
pub fn content_length(headers: &axum::http::HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| ApiError::field("Content-Length", "Content-Length must be a number of bytes"))
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({"error": self.message, "field": self.field}));
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// What the server accepts.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest k.
    pub max_k: usize,
    /// Most queries in one `POST /search`.
    pub max_queries: usize,
    /// The server's ranking (`bm25` or `bm25-static`): a request naming another is refused.
    pub ranking: String,
}

/// One checked search request: queries (id, text), their k and mode, and whether each hit carries its
/// stored document.
#[derive(Debug, PartialEq)]
pub struct Search {
    pub queries: Vec<(String, String)>,
    pub k: usize,
    pub mode: Mode,
    pub docs: bool,
}

/// Default k and mode of a request that does not give them.
const DEFAULT_K: usize = 10;

/// `POST /search`: `{"queries": [{"id": "1", "text": "…"}], "k": 10, "mode": "or", "ranking": "bm25",
/// "docs": false}`.
/// A body in the common shape (every field of its type, no field twice) is read straight into [`Body`];
/// anything else is read again through a `serde_json::Value`, whose checks name the field at fault.
pub fn parse_post(body: &[u8], limits: &Limits) -> Result<Search, ApiError> {
    match serde_json::from_slice::<Body>(body) {
        Ok(b) => b.check(limits),
        Err(_) => parse_post_value(body, limits),
    }
}

/// `POST /search`'s body in its common shape, read without the tree of values (a map per query) that
/// the `Value` path builds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    queries: Vec<BodyQuery>,
    k: Option<u64>,
    mode: Option<String>,
    ranking: Option<String>,
    docs: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BodyQuery {
    id: Option<Id>,
    text: String,
}

/// A query's id: a string, or an integer written out in digits.
struct Id(String);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Id;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_str<E>(self, s: &str) -> Result<Id, E> {
                Ok(Id(s.to_owned()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Id, E> {
                Ok(Id(n.to_string()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Id, E> {
                Ok(Id(n.to_string()))
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Body {
    /// The checks of [`parse_post_value`] that a well-typed body can still fail, in its order.
    fn check(self, limits: &Limits) -> Result<Search, ApiError> {
        check_count(self.queries.len(), limits)?;
        let queries = self.queries.into_iter().enumerate();
        let queries = queries
            .map(|(i, q)| {
                let id = q.id.map_or_else(|| (i + 1).to_string(), |Id(id)| id);
                (id, q.text)
            })
            .collect();
        let k = self.k.map_or(Ok(DEFAULT_K), |k| check_k(k, limits))?;
        let mode = mode(self.mode.as_deref())?;
        check_ranking(self.ranking.as_deref(), limits)?;
        Ok(Search {
            queries,
            k,
            mode,
            docs: self.docs.unwrap_or(false),
        })
    }
}

/// [`parse_post`] through a `serde_json::Value`: every shape the API accepts, and for any other the
/// field at fault. A key given twice in one object is refused, named (a parser that keeps the last
/// would answer another request than the one sent).
fn parse_post_value(body: &[u8], limits: &Limits) -> Result<Search, ApiError> {
    let twice = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde::de::DeserializeSeed::deserialize(
        Strict {
            path: String::new(),
            twice: &twice,
        },
        &mut de,
    )
    .and_then(|v| de.end().map(|()| v));
    if let Some((path, key)) = twice.into_inner() {
        return Err(ApiError::field(
            path,
            format!("the key '{key}' appears twice in one object: send it once"),
        ));
    }
    let value: Value =
        value.map_err(|e| ApiError::field("body", format!("the body is not valid JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::field(
            "body",
            "the body must be a JSON object with \"queries\"",
        ));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["queries", "k", "mode", "ranking", "docs"].contains(&k.as_str()))
    {
        return Err(ApiError::field(
            unknown.clone(),
            format!("unknown field '{unknown}': expected queries, k, mode, ranking or docs"),
        ));
    }
    let Some(Value::Array(list)) = fields.get("queries") else {
        return Err(ApiError::field(
            "queries",
            "\"queries\" must be an array of {\"id\": …, \"text\": …} objects",
        ));
    };
    check_count(list.len(), limits)?;
    let queries = list
        .iter()
        .enumerate()
        .map(|(i, q)| query_object(i, q))
        .collect::<Result<_, _>>()?;
    let k = match fields.get("k") {
        None | Some(Value::Null) => DEFAULT_K,
        Some(v) => match v.as_u64() {
            Some(k) => check_k(k, limits)?,
            None => return Err(ApiError::field("k", format!("k must be an integer, got {v}"))),
        },
    };
    let text = |name: &str| match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(v) => Err(ApiError::field(name, format!("{name} must be a string, got {v}"))),
    };
    let mode = mode(text("mode")?)?;
    check_ranking(text("ranking")?, limits)?;
    let docs = match fields.get("docs") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(ApiError::field(
                "docs",
                format!("docs must be true or false, got {v}"),
            ))
        }
    };
    Ok(Search {
        queries,
        k,
        mode,
        docs,
    })
}

/// A JSON value read as `serde_json::Value` is, but refusing a key given twice in an object: the
/// first such key's path (`k`, `queries[2].text`) and name go to `twice`.
struct Strict<'a> {
    path: String,
    twice: &'a std::cell::RefCell<Option<(String, String)>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, out.len());
            match seq.next_element_seed(Strict {
                path,
                twice: self.twice,
            })? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if out.contains_key(&key) {
                *self.twice.borrow_mut() = Some((path, key));
                return Err(serde::de::Error::custom("a key given twice"));
            }
            let value = map.next_value_seed(Strict {
                path,
                twice: self.twice,
            })?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// One element of "queries": an object with a string "text" and an optional string or integer "id"
/// (default: its position from 1).
fn query_object(i: usize, q: &Value) -> Result<(String, String), ApiError> {
    let at = |f: &str| format!("queries[{i}]{f}");
    let Value::Object(q) = q else {
        return Err(ApiError::field(
            at(""),
            "each query must be an object {\"id\": …, \"text\": …}",
        ));
    };
    if let Some(unknown) = q.keys().find(|k| *k != "id" && *k != "text") {
        return Err(ApiError::field(
            at(&format!(".{unknown}")),
            format!("unknown field '{unknown}' in a query: expected id and text"),
        ));
    }
    let id = match q.get("id") {
        None | Some(Value::Null) => (i + 1).to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
        Some(v) => {
            return Err(ApiError::field(
                at(".id"),
                format!("id must be a string, got {v}"),
            ))
        }
    };
    match q.get("text") {
        Some(Value::String(s)) => Ok((id, s.clone())),
        _ => Err(ApiError::field(at(".text"), "each query needs a string \"text\"")),
    }
}

/// `GET /search?q=TEXT&k=10&mode=or&ranking=bm25&docs=false`: one query, id "1".
pub fn parse_get(params: &HashMap<String, String>, limits: &Limits) -> Result<Search, ApiError> {
    if let Some(unknown) = params
        .keys()
        .find(|k| !["q", "k", "mode", "ranking", "docs"].contains(&k.as_str()))
    {
        return Err(ApiError::field(
            unknown.clone(),
            format!("unknown parameter '{unknown}': expected q, k, mode, ranking or docs"),
        ));
    }
    let Some(q) = params.get("q") else {
        return Err(ApiError::field(
            "q",
            "the query text is missing: GET /search?q=TEXT",
        ));
    };
    let k = match params.get("k") {
        None => DEFAULT_K,
        Some(v) => match v.parse::<u64>() {
            Ok(k) => check_k(k, limits)?,
            Err(_) => return Err(ApiError::field("k", format!("k must be an integer, got '{v}'"))),
        },
    };
    let mode = mode(params.get("mode").map(String::as_str))?;
    check_ranking(params.get("ranking").map(String::as_str), limits)?;
    let docs = match params.get("docs").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(v) => {
            return Err(ApiError::field(
                "docs",
                format!("docs must be true or false, got '{v}'"),
            ))
        }
    };
    Ok(Search {
        queries: vec![("1".into(), q.clone())],
        k,
        mode,
        docs,
    })
}

fn check_count(n: usize, limits: &Limits) -> Result<(), ApiError> {
    if n == 0 || n > limits.max_queries {
        return Err(ApiError::field(
            "queries",
            format!("\"queries\" holds {n} queries: send 1 to {}", limits.max_queries),
        ));
    }
    Ok(())
}

fn check_k(k: u64, limits: &Limits) -> Result<usize, ApiError> {
    match usize::try_from(k) {
        Ok(k) if (1..=limits.max_k).contains(&k) => Ok(k),
        _ => Err(ApiError::field(
            "k",
            format!("k = {k} is out of range: use 1 to {}", limits.max_k),
        )),
    }
}

fn mode(name: Option<&str>) -> Result<Mode, ApiError> {
    name.map_or(Ok(Mode::Or), |m| {
        warpsearch_query::named::<Mode>("mode", m).map_err(|e| ApiError::field("mode", e))
    })
}

fn check_ranking(name: Option<&str>, limits: &Limits) -> Result<(), ApiError> {
    match name {
        Some(r) if r != limits.ranking => Err(ApiError::field(
            "ranking",
            format!(
                "this server ranks by {}, not '{r}' (the ranking is chosen when the server starts)",
                limits.ranking
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_k: 1000,
            max_queries: 2,
            ranking: "bm25".into(),
        }
    }

    fn field(body: Value) -> Option<String> {
        parse_post(body.to_string().as_bytes(), &limits())
            .unwrap_err()
            .field
    }

    #[test]
    fn post_defaults_and_ids() {
        let s = parse_post(
            br#"{"queries": [{"text": "a b"}, {"id": 7, "text": "c"}]}"#,
            &limits(),
        )
        .unwrap();
        assert_eq!(s.queries, [("1".into(), "a b".into()), ("7".into(), "c".into())]);
        assert_eq!((s.k, s.mode), (10, Mode::Or));
    }

    #[test]
    fn every_bad_field_is_named() {
        let q = json!([{"id": "1", "text": "x"}]);
        assert_eq!(field(json!({"queries": q, "k": 0})).as_deref(), Some("k"));
        assert_eq!(field(json!({"queries": q, "k": 1001})).as_deref(), Some("k"));
        assert_eq!(field(json!({"queries": q, "k": "10"})).as_deref(), Some("k"));
        assert_eq!(
            field(json!({"queries": q, "mode": "xor"})).as_deref(),
            Some("mode")
        );
        assert_eq!(
            field(json!({"queries": q, "ranking": "tfidf"})).as_deref(),
            Some("ranking")
        );
        assert_eq!(field(json!({"queries": q, "top": 3})).as_deref(), Some("top"));
        assert_eq!(field(json!({"queries": q, "docs": 1})).as_deref(), Some("docs"));
        assert_eq!(field(json!({"queries": []})).as_deref(), Some("queries"));
        assert_eq!(
            field(json!({"queries": [q[0], q[0], q[0]]})).as_deref(),
            Some("queries")
        );
        assert_eq!(
            field(json!({"queries": [{"id": "1"}]})).as_deref(),
            Some("queries[0].text")
        );
        assert_eq!(field(json!([1])).as_deref(), Some("body"));
        assert!(parse_post(
            json!({"queries": q, "ranking": "bm25"}).to_string().as_bytes(),
            &limits()
        )
        .is_ok());
    }

    /// The typed path reads every body it accepts as the `Value` path does, and leaves every body it
    /// cannot type to that path: the same searches, the same errors.
    #[test]
    fn typed_bodies_read_as_values_do() {
        let q = r#"{"id": "q1", "text": "a b"}"#;
        let bodies = [
            // (body, read by the typed path)
            (format!(r#"{{"queries": [{q}]}}"#), true),
            (
                format!(r#"{{"k": 5, "mode": "and", "ranking": "bm25", "queries": [{q}, {q}]}}"#),
                true,
            ),
            (
                r#"{"queries": [{"text": "caf\u00e9\n\"x\"", "id": "\u0031"}]}"#.into(),
                true,
            ),
            (
                format!(r#"{{"queries": [{{"id": null, "text": "t"}}, {q}], "k": null, "mode": null}}"#),
                true,
            ),
            (format!(r#"{{"queries": [{q}], "k": 0}}"#), true),
            (format!(r#"{{"queries": [{q}], "k": 1001}}"#), true),
            (format!(r#"{{"queries": [{q}, {q}, {q}]}}"#), true),
            (r#"{"queries": []}"#.into(), true),
            (format!(r#"{{"queries": [{q}], "mode": "xor"}}"#), true),
            (format!(r#"{{"queries": [{q}], "ranking": "tfidf"}}"#), true),
            (format!(r#"{{"queries": [{q}], "k": 0, "mode": "xor"}}"#), true),
            (format!(r#"{{"queries": [{q}], "docs": true}}"#), true),
            (format!(r#"{{"queries": [{q}], "docs": false}}"#), true),
            (format!(r#"{{"queries": [{q}], "docs": null}}"#), true),
            (format!(r#"{{"queries": [{q}], "docs": 1}}"#), false),
            (format!(r#"{{"queries": [{q}], "docs": "true"}}"#), false),
            (
                format!(r#"{{"queries": [{q}], "docs": true, "docs": false}}"#),
                false,
            ),
            (
                r#"{"queries": [{"id": 7, "text": "c"}, {"id": -3, "text": "d"}]}"#.into(),
                true,
            ),
            (r#"{"queries": [{"id": 7.5, "text": "c"}]}"#.into(), false),
            (r#"{"queries": [{"id": true, "text": "c"}]}"#.into(), false),
            (format!(r#"{{"queries": [{q}], "top": 3}}"#), false),
            (
                r#"{"queries": [{"id": "1", "text": "x", "lang": "en"}]}"#.into(),
                false,
            ),
            (format!(r#"{{"queries": [{q}], "k": 3, "k": 4}}"#), false),
            (r#"{"queries": [{"id": "1"}]}"#.into(), false),
            (r#"{"queries": [{"id": "1", "text": 5}]}"#.into(), false),
            (format!(r#"{{"queries": [{q}], "k": "10"}}"#), false),
            (format!(r#"{{"queries": [{q}], "k": -1}}"#), false),
            (format!(r#"{{"queries": [{q}], "k": 3.0}}"#), false),
            (format!(r#"{{"queries": [{q}], "mode": 1}}"#), false),
            (r#"{"queries": {"id": "1"}}"#.into(), false),
            (r#"[1]"#.into(), false),
            (r#"{"queries": [{"id": "1", "text": "x"}"#.into(), false),
        ];
        for (body, typed) in &bodies {
            let b = body.as_bytes();
            assert_eq!(serde_json::from_slice::<Body>(b).is_ok(), *typed, "{body}");
            match (parse_post(b, &limits()), parse_post_value(b, &limits())) {
                (Ok(a), Ok(v)) => assert_eq!(a, v, "{body}"),
                (Err(a), Err(v)) => assert_eq!(
                    (a.status, a.message, a.field),
                    (v.status, v.message, v.field),
                    "{body}"
                ),
                (a, v) => panic!("{body}: {a:?} against {v:?}"),
            }
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_by_name() {
        for (body, field) in [
            (r#"{"queries": [{"text": "x"}], "k": 3, "k": 4}"#, "k"),
            (
                r#"{"queries": [{"text": "x"}, {"id": 1, "id": 2, "text": "y"}]}"#,
                "queries[1].id",
            ),
            (
                r#"{"queries": [{"text": "x"}], "queries": [{"text": "y"}]}"#,
                "queries",
            ),
        ] {
            let e = parse_post(body.as_bytes(), &limits()).unwrap_err();
            assert_eq!(
                (e.status, e.field.as_deref()),
                (StatusCode::BAD_REQUEST, Some(field)),
                "{body}"
            );
            assert!(e.message.contains("twice"), "{}", e.message);
        }
        // Equal keys in different objects are no duplicates.
        let ok = r#"{"queries": [{"id": 1, "text": "x"}, {"id": 2, "text": "y"}], "k": 3}"#;
        assert_eq!(parse_post(ok.as_bytes(), &limits()).unwrap().queries.len(), 2);
    }

    #[test]
    fn get_parameters() {
        let p = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let s = parse_get(&p(&[("q", "fox"), ("k", "3"), ("mode", "and")]), &limits()).unwrap();
        assert_eq!((s.k, s.mode, s.queries[0].1.as_str()), (3, Mode::And, "fox"));
        let e = parse_get(&p(&[("k", "3")]), &limits()).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("q"));
        let e = parse_get(&p(&[("q", "x"), ("k", "-1")]), &limits()).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("k"));
        assert!(!s.docs);
        let s = parse_get(&p(&[("q", "x"), ("docs", "true")]), &limits()).unwrap();
        assert!(s.docs);
        let s = parse_get(&p(&[("q", "x"), ("docs", "false")]), &limits()).unwrap();
        assert!(!s.docs);
        let e = parse_get(&p(&[("q", "x"), ("docs", "yes")]), &limits()).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("docs"));
    }
}
