//! Checking a JSON document against its documented schema: the field names and JSON types of
//! each object, and that docs/ describes every field.

use std::path::Path;

use serde_json::Value;

/// An object's fields with their JSON types; `?` marks a field that may be absent.
pub type Schema = &'static [(&'static str, &'static str)];

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `v` is an object with exactly `schema`'s fields (optional ones may be absent), each of its
/// type; an integer passes where a number is wanted.
pub fn assert_shape(v: &Value, schema: Schema, at: &str) {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("{at} is not an object"));
    for key in obj.keys() {
        assert!(
            schema.iter().any(|(name, _)| name == key),
            "{at}.{key} is not in the schema"
        );
    }
    for (name, kind) in schema {
        let (kind, optional) = match kind.strip_suffix('?') {
            Some(k) => (k, true),
            None => (*kind, false),
        };
        let Some(field) = obj.get(*name) else {
            assert!(optional, "{at}.{name} is missing");
            continue;
        };
        let found = type_of(field);
        assert!(
            found == kind || (kind == "number" && found == "integer"),
            "{at}.{name} is {found}, the schema says {kind}"
        );
    }
}

pub fn each<'a>(v: &'a Value, field: &str) -> &'a Vec<Value> {
    v[field].as_array().expect("an array")
}

/// `docs/FILE` names every field of `schemas` (as `` `field` ``).
pub fn assert_documented(file: &str, schemas: &[Schema]) {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(file);
    let text = std::fs::read_to_string(&docs).unwrap();
    for (name, _) in schemas.iter().flat_map(|s| s.iter()) {
        assert!(
            text.contains(&format!("`{name}`")),
            "docs/{file} does not describe `{name}`"
        );
    }
}
