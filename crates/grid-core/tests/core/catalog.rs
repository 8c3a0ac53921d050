//! The catalog snapshot: the JSON contract, what the role is offered, the policy and
//! language derived from its grants, and the fingerprint.

use crate::common;

use std::sync::Arc;

use grid_core::audit::to_hex;
use grid_core::catalog::{
    attach_descriptions, CatalogError, CatalogSnapshot, Description, RelationKind, ValueHint,
    HINT_VALUE_BYTES,
};
use grid_core::grammar::spec::LexiconKind;
use grid_core::policy::Verb;
use grid_core::{Policy, Session};

const DEMO: &str = include_str!("fixtures/catalog_demo.json");

fn demo() -> CatalogSnapshot {
    CatalogSnapshot::from_json(DEMO).expect("demo snapshot")
}

#[test]
fn reads_the_contract_format() {
    let s = demo();
    assert_eq!(s.role, "analyst");
    assert_eq!(s.relations.len(), 5);
    let emp = &s.relations[1];
    assert_eq!(emp.comment.as_deref(), Some("People on the payroll"));
    // Privileges the engine does not use (REFERENCES) are dropped; names are case-blind.
    assert_eq!(
        emp.privileges.iter().copied().collect::<Vec<_>>(),
        vec![Verb::Select]
    );
    assert!(emp.columns[0].privileges.contains(&Verb::Select));
    // Missing optional keys default.
    assert!(!emp.columns[3].not_null && emp.columns[3].comment.is_none());
    assert_eq!(s.relations[4].kind, RelationKind::View);
    assert!(s.relations[4].primary_key.is_empty());
    let minimal = CatalogSnapshot::from_json(
        r#"{"format":1,"role":"r","relations":[{"schema":"public","name":"t","kind":"partitioned_table"}]}"#,
    )
    .unwrap();
    assert_eq!(minimal.relations[0].kind, RelationKind::Other);
    assert!(minimal.search_path.is_empty());
}

#[test]
fn rejects_bad_snapshots_with_clear_errors() {
    let err = |t: &str| CatalogSnapshot::from_json(t).unwrap_err();
    assert!(matches!(
        err(r#"{"format":2,"role":"r"}"#),
        CatalogError::Format { found: 2 }
    ));
    assert!(matches!(err("not json"), CatalogError::Json(_)));
    assert!(matches!(err(r#"{"format":1}"#), CatalogError::Json(_)));
    assert!(matches!(
        err(r#"{"format":1,"role":"r","relations":[{"schema":"s"}]}"#),
        CatalogError::Json(_)
    ));
    let dup = r#"{"format":1,"role":"r","relations":[{"schema":"s","name":"t"},{"schema":"s","name":"t"}]}"#;
    assert_eq!(
        err(dup).to_string(),
        "catalog snapshot lists relation s.t twice"
    );
    let dup_col = r#"{"format":1,"role":"r","relations":[{"schema":"s","name":"t","columns":[{"name":"a"},{"name":"a"}]}]}"#;
    assert!(matches!(err(dup_col), CatalogError::Duplicate { .. }));
}

#[test]
fn relations_off_the_search_path_or_hidden_are_offered_qualified() {
    let s = demo();
    let (shown, omitted) = s.visible();
    assert_eq!(
        shown.iter().map(|o| o.key()).collect::<Vec<_>>(),
        vec![
            "departments",
            "employees",
            "orders",
            "salaries",
            "reporting.monthly"
        ]
    );
    assert!(shown[4].qualified && shown[4].qualifier() == Some("reporting"));
    assert!(omitted.is_empty(), "{omitted:?}");

    // Two schemas on the path with one relation name: the earlier schema's is the bare
    // name, the other is written qualified; so is one whose name resolves elsewhere
    // (`on_search_path` false: a relation the role cannot see comes first).
    let shadow = CatalogSnapshot::from_json(
        r#"{"format":1,"role":"r","search_path":["app","public"],"relations":[
            {"schema":"app","name":"t","on_search_path":true,"privileges":["select"],"columns":[{"name":"a","privileges":["select"]}]},
            {"schema":"public","name":"t","on_search_path":true,"privileges":["select"],"columns":[{"name":"b","privileges":["select"]}]},
            {"schema":"public","name":"u","on_search_path":true,"privileges":["select"]},
            {"schema":"public","name":"v","on_search_path":false,"privileges":["select"]}]}"#,
    )
    .unwrap();
    let (shown, omitted) = shadow.visible();
    assert_eq!(
        shown.iter().map(|o| o.key()).collect::<Vec<_>>(),
        vec!["t", "u", "public.t", "public.v"]
    );
    assert_eq!(shown[0].relation.qualified(), "app.t");
    assert!(omitted.is_empty());
    let schema = shadow.schema();
    assert_eq!(schema.tables[0].columns[0].name, "a");
    assert_eq!(schema.tables[2].qualifier.as_deref(), Some("public"));
    assert_eq!(schema.tables[2].columns[0].name, "b");
    assert_eq!(
        schema.table("t").map(|t| &t.columns[0].name),
        Some(&"a".into())
    );
}

/// Search path `app, public`: `app.orders` hides `public.orders`; `hr` and `Sales` are off
/// the path; `hr.salaries` may only be updated (two columns), `hr.employees` read (but not
/// `salary`) and deleted from.
const QUALIFIED: &str = include_str!("fixtures/catalog_qualified.json");

#[test]
fn qualified_relations_reach_policy_lexicon_and_language() {
    let s = CatalogSnapshot::from_json(QUALIFIED).unwrap();
    let keys: Vec<String> = s.visible().0.iter().map(|o| o.key()).collect();
    assert_eq!(
        keys,
        vec![
            "orders",
            "employees",
            "Sales.Leads",
            "hr.employees",
            "hr.salaries",
            "public.orders"
        ]
    );
    let policy = s.policy(&Policy::default()).unwrap();
    assert_eq!(
        policy.verbs,
        vec![Verb::Select, Verb::Insert, Verb::Update, Verb::Delete]
    );
    assert_eq!(policy.insert_tables, Some(vec!["public.orders".into()]));
    assert_eq!(policy.update_tables, Some(vec!["hr.salaries".into()]));
    assert_eq!(policy.delete_tables, Some(vec!["hr.employees".into()]));
    // grid.policy may list a relation by its key or as schema.name.
    let base = Policy::from_json(
        r#"{"delete_tables":["nothing"],"update_tables":["hr.salaries"],"insert_tables":["public.orders"]}"#,
    )
    .unwrap();
    let narrowed = s.policy(&base).unwrap();
    assert_eq!(
        narrowed.verbs,
        vec![Verb::Select, Verb::Insert, Verb::Update]
    );

    let d = common::dialect();
    let reserved = |w: &str| d.is_reserved(w);
    let lx = s.lexicon(&policy, &reserved).unwrap();
    let bare = |k| lx.words(k).cloned().collect::<Vec<_>>();
    let qualified = |k| lx.qualified(k).map(|q| q.key()).collect::<Vec<_>>();
    assert_eq!(bare(LexiconKind::Table), vec!["employees", "orders"]);
    assert_eq!(
        qualified(LexiconKind::Table),
        vec!["Sales.Leads", "hr.employees", "public.orders"],
        "hr.salaries is not readable"
    );
    assert_eq!(qualified(LexiconKind::UpdateTable), vec!["hr.salaries"]);
    assert!(bare(LexiconKind::UpdateTable).is_empty());
    // The foreign key from public.orders reaches hr.employees by (schema, name).
    let schema = s.schema();
    let orders = &schema.tables[5];
    assert_eq!(orders.qualifier.as_deref(), Some("public"));
    assert_eq!(orders.foreign_keys, vec![(2, 3, 0)]);

    let lang = s.language(Arc::clone(&d), &Policy::default()).unwrap();
    let mut ss = Session::new(&lang);
    for ok in [
        "SELECT id FROM hr.employees",
        "SELECT total FROM public.orders JOIN orders ON true",
        "SELECT id FROM \"Sales\".\"Leads\"",
        "UPDATE hr.salaries SET amount = 1",
        "DELETE FROM hr.employees WHERE id = 1",
        "INSERT INTO public.orders (id) VALUES (1)",
    ] {
        assert!(ss.complete(ok.as_bytes()), "{ok}");
    }
    // Every relation is written in the prompt as the mask spells it, where the role may
    // read it.
    let (offered, _) = s.visible();
    let written = grid_core::prompt::written_names(&offered, &reserved);
    for o in &offered {
        let r = o.relation;
        let sql = format!(
            "SELECT 1 FROM {}",
            written[&(r.schema.as_str(), r.name.as_str())]
        );
        assert_eq!(ss.complete(sql.as_bytes()), r.grants(Verb::Select), "{sql}");
    }
    for bad in [
        "SELECT amount FROM hr.salaries",
        "SELECT id FROM hr.orders",
        "SELECT id FROM public.employees",
        "INSERT INTO hr.employees",
        "DELETE FROM public.orders",
        "UPDATE hr.employees",
    ] {
        assert!(!ss.viable(bad.as_bytes()), "{bad}");
    }
}

#[test]
fn schema_keeps_visible_columns_and_keys() {
    let schema = demo().schema();
    assert_eq!(schema.tables.len(), 5);
    assert_eq!(schema.tables[4].key(), "reporting.monthly");
    assert!(
        schema.table("monthly").is_none(),
        "the bare name does not reach it"
    );
    let emp = schema.table("employees").unwrap();
    assert_eq!(emp.primary_key, vec![0]);
    // employees.dept_id -> departments.id
    assert_eq!(emp.foreign_keys, vec![(2, 0, 0)]);
    let sal = schema.table("salaries").unwrap();
    assert_eq!(sal.columns.len(), 2);
}

fn grants(role: &str, rels: &str) -> CatalogSnapshot {
    CatalogSnapshot::from_json(&format!(
        r#"{{"format":1,"role":"{role}","search_path":["public"],"relations":[{rels}]}}"#
    ))
    .unwrap()
}

/// A clerk: reads and inserts into orders, inserts only into an inbox it cannot read.
fn clerk() -> CatalogSnapshot {
    grants(
        "clerk",
        r#"{"schema":"public","name":"orders","on_search_path":true,"privileges":["select","insert"],
            "columns":[{"name":"id","privileges":["select","insert"]},{"name":"total","privileges":["select","insert"]}]},
           {"schema":"public","name":"inbox","on_search_path":true,"privileges":[],
            "columns":[{"name":"body","privileges":["insert"]}]}"#,
    )
}

#[test]
fn policy_follows_the_grants() {
    let analyst = demo().policy(&Policy::default()).unwrap();
    assert_eq!(analyst.verbs, vec![Verb::Select, Verb::Update]);
    assert_eq!(analyst.update_tables, Some(vec!["salaries".to_string()]));
    assert_eq!(analyst.insert_tables, Some(vec![]));

    let clerk = clerk().policy(&Policy::default()).unwrap();
    assert_eq!(clerk.verbs, vec![Verb::Select, Verb::Insert]);
    assert_eq!(
        clerk.insert_tables,
        Some(vec!["inbox".to_string(), "orders".to_string()])
    );
    // Per-role bans and verb limits from grid.policy narrow the grants further.
    let base = Policy::from_json(
        r#"{"verbs":["select","insert"],"ban":["cte"],"insert_tables":["orders"]}"#,
    )
    .unwrap();
    let narrowed = self::clerk().policy(&base).unwrap();
    assert_eq!(narrowed.insert_tables, Some(vec!["orders".to_string()]));
    assert_eq!(narrowed.ban.len(), 1);
    let read_only = self::clerk().policy(&Policy::select_only()).unwrap();
    assert_eq!(read_only.verbs, vec![Verb::Select]);

    let nothing = grants("nobody", "");
    let e = nothing.policy(&Policy::default()).unwrap_err();
    assert_eq!(e.to_string(), "role nobody may use no relation");
}

#[test]
fn lexicon_reads_only_readable_tables_and_every_touchable_column() {
    let s = clerk();
    let d = common::dialect();
    let reserved = |w: &str| d.is_reserved(w);
    let policy = s.policy(&Policy::default()).unwrap();
    let lx = s.lexicon(&policy, &reserved).unwrap();
    let words = |k| lx.words(k).cloned().collect::<Vec<_>>();
    assert_eq!(words(LexiconKind::Table), vec!["orders"]);
    assert_eq!(words(LexiconKind::InsertTable), vec!["inbox", "orders"]);
    assert!(words(LexiconKind::DeleteTable).is_empty());
    assert_eq!(words(LexiconKind::Column), vec!["body", "id", "total"]);
}

#[test]
fn the_language_follows_grant_and_revoke() {
    let d = common::dialect();
    let analyst = demo().language(Arc::clone(&d), &Policy::default()).unwrap();
    let mut s = Session::new(&analyst);
    assert!(s.complete(b"SELECT e.name FROM employees e JOIN orders o ON o.employee_id = e.id"));
    assert!(s.complete(b"SELECT \"Total Due\" FROM orders"));
    assert!(!s.viable(b"SELECT * FROM monthly"), "off the search path");
    assert!(s.complete(b"SELECT month FROM reporting.monthly"));
    assert!(!s.viable(b"DELETE FROM orders"), "no DELETE grant");
    assert!(s.complete(b"UPDATE salaries SET amount = 1"));
    assert!(!s.viable(b"INSERT INTO"), "no INSERT grant");

    // Revoke SELECT on orders entirely: the relation leaves the snapshot.
    let mut revoked = demo();
    revoked.relations.retain(|r| r.name != "orders");
    let lang = revoked
        .language(Arc::clone(&d), &Policy::default())
        .unwrap();
    let mut s = Session::new(&lang);
    assert!(!s.viable(b"SELECT id FROM orders"));
    assert!(s.complete(b"SELECT id FROM employees"));

    let clerk = clerk().language(d, &Policy::default()).unwrap();
    let mut s = Session::new(&clerk);
    assert!(s.complete(b"INSERT INTO inbox (body) VALUES ('hello')"));
    assert!(
        !s.viable(b"SELECT body FROM inbox"),
        "inbox is not readable"
    );
    assert_ne!(clerk.fingerprint, analyst.fingerprint);
}

#[test]
fn fingerprint_is_canonical() {
    let a = demo();
    // Key order, whitespace, relation order and privilege order do not matter.
    let mut v: serde_json::Value = serde_json::from_str(DEMO).unwrap();
    let rels = v["relations"].as_array_mut().unwrap();
    rels.reverse();
    rels[0]["privileges"] = serde_json::json!(["SELECT", "select"]);
    let b = CatalogSnapshot::from_json(&serde_json::to_string_pretty(&v).unwrap()).unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.fingerprint(), demo().fingerprint());

    // Anything that changes what the role may do or see changes it.
    let changed = |f: &dyn Fn(&mut CatalogSnapshot)| {
        let mut s = demo();
        f(&mut s);
        s.fingerprint()
    };
    let base = a.fingerprint();
    assert_ne!(
        base,
        changed(&|s| {
            s.relations[1].columns[1].privileges.remove(&Verb::Select);
        })
    );
    assert_ne!(base, changed(&|s| s.relations[1].comment = None));
    assert_ne!(base, changed(&|s| s.role = "hr".into()));
    assert_ne!(base, changed(&|s| s.search_path.push("reporting".into())));
    assert_ne!(base, changed(&|s| s.relations[1].columns.swap(0, 1)));
    assert_ne!(base, changed(&|s| s.relations[3].on_search_path = false));
    assert_ne!(
        base,
        changed(&|s| s.relations[1].columns[3].ty = "timestamp".into())
    );
    assert_ne!(
        base,
        changed(&|s| s.denied_functions = vec!["upper".into()])
    );
    // A value hint changes what the prompt shows; a snapshot without one keeps the
    // fingerprint it had before hints existed (archived seals name it).
    let hint = |complete| ValueHint {
        values: vec!["FR".into(), "US".into()],
        complete,
    };
    let hinted = changed(&|s| s.relations[1].columns[1].value_hint = Some(hint(true)));
    assert_ne!(base, hinted);
    assert_ne!(
        hinted,
        changed(&|s| s.relations[1].columns[1].value_hint = Some(hint(false)))
    );
    assert_eq!(to_hex(&base), "9eb4c79c6e50c94d1863210e1472846f");
    // So do descriptions, the relation's and a column's apart.
    let rel = changed(&|s| s.relations[1].description = Some("staff".into()));
    let col = changed(&|s| s.relations[1].columns[0].description = Some("staff".into()));
    assert_ne!(base, rel);
    assert_ne!(base, col);
    assert_ne!(rel, col);
    // The order of the denied names does not matter.
    let mut x = demo();
    x.denied_functions = vec!["upper".into(), "lower".into()];
    let mut y = demo();
    y.denied_functions = vec!["lower".into(), "upper".into()];
    assert_eq!(x.fingerprint(), y.fingerprint());
}

#[test]
fn a_function_the_role_may_not_execute_leaves_the_language() {
    let d = common::dialect();
    let all = demo().language(Arc::clone(&d), &Policy::default()).unwrap();
    let mut s = Session::new(&all);
    assert!(s.complete(b"SELECT upper(name) FROM employees"));
    assert!(s.complete(b"SELECT lower(name) FROM employees"));
    // The JSON form a snapshot takes when a DBA revoked EXECUTE on upper from PUBLIC.
    let mut v: serde_json::Value = serde_json::from_str(DEMO).unwrap();
    v["denied_functions"] = serde_json::json!(["upper"]);
    let snap = CatalogSnapshot::from_json(&v.to_string()).unwrap();
    let denied = snap.language(Arc::clone(&d), &Policy::default()).unwrap();
    let mut s = Session::new(&denied);
    assert!(
        !s.viable(b"SELECT upper("),
        "a revoked function is not offered"
    );
    assert!(!s.viable(b"SELECT UPPER("), "in any spelling");
    assert!(s.complete(b"SELECT lower(name) FROM employees"));
    assert_ne!(all.fingerprint, denied.fingerprint);
    // Nothing denied: the field stays out of the JSON (old snapshots read the same).
    let text = serde_json::to_string(&demo()).unwrap();
    assert!(!text.contains("denied_functions"), "{text}");
}

#[test]
fn a_value_hint_is_for_a_category_only() {
    let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let h = ValueHint::of(v(&["US", "FR", "US"]), false, true, 3).expect("a category");
    assert_eq!(h.values, v(&["FR", "US"]), "distinct and sorted");
    assert!(h.complete);
    assert!(
        !ValueHint::of(v(&["FR", "US"]), false, false, 2)
            .unwrap()
            .complete
    );
    // Too many values, none, only blanks, one the host left out for its length, one too
    // long, one that would break the prompt's line.
    assert_eq!(ValueHint::of(v(&["a", "b", "c"]), false, true, 2), None);
    assert_eq!(ValueHint::of(vec![], false, true, 2), None);
    assert_eq!(ValueHint::of(v(&["", " "]), false, true, 2), None);
    assert_eq!(
        ValueHint::of(v(&["", "a"]), false, true, 2).unwrap().values,
        v(&["", "a"])
    );
    assert_eq!(ValueHint::of(v(&["a"]), true, true, 2), None);
    assert_eq!(
        ValueHint::of(vec!["x".repeat(HINT_VALUE_BYTES + 1)], false, true, 2),
        None
    );
    assert!(ValueHint::of(vec!["x".repeat(HINT_VALUE_BYTES)], false, true, 2).is_some());
    assert_eq!(ValueHint::of(v(&["a\nb"]), false, true, 2), None);
}

/// A description lands beside the relation or column it names, and only where the snapshot
/// lists it: one of a relation or a column the role may not see is dropped, so it cannot
/// reach the prompt. The rest of the document is left as it was.
#[test]
fn descriptions_attach_only_to_what_the_snapshot_lists() {
    let d = |relation: &str, column: Option<&str>, text: &str| Description {
        schema: "public".into(),
        relation: relation.into(),
        column: column.map(str::to_string),
        text: text.into(),
    };
    let mut v: serde_json::Value = serde_json::from_str(DEMO).unwrap();
    let before = v.clone();
    let put = attach_descriptions(
        &mut v,
        &[
            d("employees", None, "everyone on the payroll"),
            d("employees", Some("hired"), "the first working day"),
            // A relation the analyst does not see, one in another schema, a column it
            // does not see, a column of that name in another relation.
            d("bonuses", None, "who gets a bonus"),
            Description {
                schema: "reporting".into(),
                ..d("employees", None, "elsewhere")
            },
            d("employees", Some("salary"), "the pay"),
            d("departments", Some("hired"), "not a column of departments"),
        ],
    );
    assert_eq!(put, 2);
    let s = CatalogSnapshot::from_json(&v.to_string()).unwrap();
    let emp = &s.relations[1];
    assert_eq!(emp.description.as_deref(), Some("everyone on the payroll"));
    assert_eq!(
        emp.columns[3].description.as_deref(),
        Some("the first working day")
    );
    let described: usize = s
        .relations
        .iter()
        .map(|r| {
            usize::from(r.description.is_some())
                + r.columns.iter().filter(|c| c.description.is_some()).count()
        })
        .sum();
    assert_eq!(described, 2);
    // The comments stay; nothing else moved.
    assert_eq!(emp.comment.as_deref(), Some("People on the payroll"));
    v["relations"][1]
        .as_object_mut()
        .unwrap()
        .remove("description");
    v["relations"][1]["columns"][3]
        .as_object_mut()
        .unwrap()
        .remove("description");
    assert_eq!(v, before);
    // A snapshot without descriptions serializes without the key.
    let plain = serde_json::to_value(demo()).unwrap();
    assert!(plain["relations"][1].get("description").is_none());
}
