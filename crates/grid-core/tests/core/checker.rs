//! The semantic checker on a hand-made catalog: alias-aware binding, scopes, per-verb
//! column privileges, and named violations.

use grid_core::catalog::CatalogSnapshot;
use grid_core::checker::{check, ViolationKind};
use grid_core::policy::Verb;

const DEMO: &str = include_str!("fixtures/catalog_demo.json");

fn analyst() -> CatalogSnapshot {
    CatalogSnapshot::from_json(DEMO).unwrap()
}

/// A clerk: reads and inserts orders (except `note`, which it may only read), reads
/// employees' names only, may delete nothing.
fn clerk() -> CatalogSnapshot {
    CatalogSnapshot::from_json(
        r#"{"format":1,"role":"clerk","search_path":["public"],"relations":[
        {"schema":"public","name":"employees","on_search_path":true,"privileges":[],
         "columns":[{"name":"id","privileges":["select"]},{"name":"name","privileges":["select"]}]},
        {"schema":"public","name":"orders","on_search_path":true,"privileges":[],
         "columns":[{"name":"id","privileges":["select","insert"]},{"name":"employee_id","privileges":["select","insert"]},
                    {"name":"total","privileges":["select","insert","update"]},{"name":"note","privileges":["select"]}]}]}"#,
    )
    .unwrap()
}

fn kinds(snap: &CatalogSnapshot, sql: &str) -> Vec<ViolationKind> {
    check(sql, snap).into_iter().map(|v| v.kind).collect()
}

fn clean(snap: &CatalogSnapshot, sql: &str) {
    let v = check(sql, snap);
    assert!(
        v.is_empty(),
        "{sql}: {:?}",
        v.iter().map(|v| v.to_string()).collect::<Vec<_>>()
    );
}

fn col(table: &str, column: &str, privilege: Verb) -> ViolationKind {
    ViolationKind::ColumnPrivilege {
        table: table.into(),
        column: column.into(),
        privilege,
    }
}

fn unknown(q: Option<&str>, column: &str) -> ViolationKind {
    ViolationKind::UnknownColumn {
        qualifier: q.map(str::to_string),
        column: column.into(),
    }
}

#[test]
fn binds_through_aliases_and_scopes() {
    let a = analyst();
    for sql in [
        "SELECT e.name, o.\"Total Due\" FROM employees AS e JOIN orders o ON o.employee_id = e.id",
        "SELECT E.Name FROM Employees E WHERE E.HIRED > '2024-01-01'",
        "SELECT name FROM employees e WHERE EXISTS (SELECT 1 FROM orders o WHERE o.employee_id = e.id)",
        "SELECT name FROM employees WHERE id IN (SELECT employee_id FROM orders WHERE placed > hired)",
        "WITH big AS (SELECT employee_id, sum(\"Total Due\") AS t FROM orders GROUP BY employee_id) \
         SELECT e.name, big.t FROM employees e JOIN big ON big.employee_id = e.id ORDER BY t DESC",
        "SELECT name AS n, count(*) AS c FROM employees GROUP BY n ORDER BY c DESC, n",
        "SELECT t.c FROM (SELECT count(*) AS c FROM orders) AS t",
        "SELECT x.a FROM (SELECT name FROM employees) AS x(a)",
        "SELECT title FROM departments JOIN employees ON dept_id = departments.id",
        "SELECT dept_id FROM employees JOIN (SELECT id AS dept_id FROM departments) d USING (dept_id)",
        "SELECT name FROM employees UNION SELECT title FROM departments ORDER BY name",
        "SELECT employees.* FROM employees, departments WHERE departments.id = employees.dept_id",
        "SELECT public.employees.name FROM public.employees",
        "SELECT employee_id FROM salaries",
        "SELECT rank() OVER (PARTITION BY dept_id ORDER BY hired) FROM employees",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
        "SELECT CASE WHEN hired IS NULL THEN 'x' ELSE name END FROM employees LIMIT 5",
        // Expression forms whose words are not column references.
        "SELECT CURRENT_DATE, now(), extract(year FROM hired), date_part('year', hired) FROM employees",
        "SELECT hired + INTERVAL '1 day', CAST(id AS text), id::text, TRUE, NULL FROM employees",
        "SELECT position('a' IN name), substring(name FROM 1 FOR 2), trim(both ' ' FROM name) FROM employees",
        "SELECT count(DISTINCT name), string_agg(name, ',' ORDER BY name) FROM employees",
        "SELECT name FROM employees WHERE name ILIKE 'a%' AND hired BETWEEN '2020-01-01' AND CURRENT_DATE",
        "SELECT name FROM employees WHERE id = ANY (SELECT employee_id FROM orders) OFFSET 2",
    ] {
        clean(&a, sql);
    }
}

#[test]
fn unresolvable_references_are_violations() {
    let a = analyst();
    assert_eq!(
        kinds(&a, "SELECT nope FROM employees"),
        vec![unknown(None, "nope")]
    );
    assert_eq!(
        kinds(&a, "SELECT \"Name\" FROM employees"),
        vec![unknown(None, "Name")]
    );
    assert_eq!(
        kinds(&a, "SELECT e.id FROM orders o"),
        vec![ViolationKind::UnknownRelation { name: "e".into() }]
    );
    // An aliased table is no longer reachable by its own name.
    assert_eq!(
        kinds(&a, "SELECT employees.id FROM employees e"),
        vec![ViolationKind::UnknownRelation {
            name: "employees".into()
        }]
    );
    assert_eq!(
        kinds(&a, "SELECT t.id FROM (SELECT name FROM employees) t"),
        vec![unknown(Some("t"), "id")]
    );
    assert_eq!(
        kinds(
            &a,
            "SELECT id FROM employees JOIN orders ON employee_id = employees.id"
        ),
        vec![ViolationKind::AmbiguousColumn {
            column: "id".into(),
            tables: vec!["employees".into(), "orders".into()]
        }]
    );
    // An output alias is visible to ORDER BY, not to WHERE.
    assert_eq!(
        kinds(&a, "SELECT name AS n FROM employees WHERE n = 'x'"),
        vec![unknown(None, "n")]
    );
    assert_eq!(
        kinds(&a, "SELECT * FROM monthly"),
        vec![ViolationKind::UnknownRelation {
            name: "monthly".into()
        }]
    );
    // Off the search path, the relation is reached qualified only.
    clean(&a, "SELECT * FROM reporting.monthly");
    clean(&a, "SELECT monthly.month FROM reporting.monthly");
    // A subquery's FROM items are not visible to the enclosing query.
    assert_eq!(
        kinds(
            &a,
            "SELECT o.id FROM employees WHERE id IN (SELECT employee_id FROM orders o)"
        ),
        vec![ViolationKind::UnknownRelation { name: "o".into() }]
    );
    let unsupported = kinds(&a, "SELECT * FROM generate_series(1, 3)");
    assert!(
        matches!(unsupported[..], [ViolationKind::Unsupported { .. }]),
        "{unsupported:?}"
    );
}

/// Search path `app, public`; `hr` and `Sales` off it; `public.orders` hidden by
/// `app.orders` (see the fixture).
fn qualified() -> CatalogSnapshot {
    CatalogSnapshot::from_json(include_str!("fixtures/catalog_qualified.json")).unwrap()
}

#[test]
fn qualified_names_bind_to_their_schema() {
    let q = qualified();
    for sql in [
        "SELECT id FROM hr.employees",
        // The bare table name qualifies columns of a qualified FROM item, as in PostgreSQL.
        "SELECT employees.name FROM hr.employees",
        "SELECT e.name FROM hr.employees e WHERE e.id = 1",
        "SELECT hr.employees.name FROM hr.employees",
        "SELECT total FROM public.orders",
        "SELECT employees FROM orders",
        "SELECT o.total, a.employees FROM public.orders o JOIN orders a ON a.id = o.id",
        "SELECT id FROM \"Sales\".\"Leads\"",
        "SELECT \"Leads\".id FROM \"Sales\".\"Leads\"",
        "SELECT id FROM HR.EMPLOYEES",
        // A relation on the path may be qualified too (the mask offers it bare).
        "SELECT employees FROM app.orders",
        "UPDATE hr.salaries SET amount = 1, employee_id = 2",
        "DELETE FROM hr.employees WHERE id = 1",
        "INSERT INTO public.orders (id, total) VALUES (1, 2)",
    ] {
        clean(&q, sql);
    }
    let hr = |t: &str| format!("hr.{t}");
    assert_eq!(
        kinds(&q, "SELECT total FROM orders"),
        vec![unknown(None, "total")],
        "the bare name reaches app.orders"
    );
    assert_eq!(
        kinds(&q, "SELECT salary FROM hr.employees"),
        vec![col(&hr("employees"), "salary", Verb::Select)]
    );
    assert_eq!(
        kinds(&q, "SELECT employees.salary FROM hr.employees"),
        vec![col(&hr("employees"), "salary", Verb::Select)]
    );
    assert!(
        kinds(&q, "SELECT amount FROM hr.salaries").contains(&ViolationKind::TablePrivilege {
            table: hr("salaries"),
            privilege: Verb::Select
        })
    );
    for (sql, name) in [
        ("SELECT 1 FROM hr.orders", "hr.orders"),
        ("SELECT 1 FROM salaries", "salaries"),
        ("SELECT 1 FROM \"HR\".employees", "\"HR\".employees"),
        (
            "SELECT hr.employees.id FROM public.employees",
            "hr.employees",
        ),
    ] {
        assert_eq!(
            kinds(&q, sql),
            vec![ViolationKind::UnknownRelation { name: name.into() }],
            "{sql}"
        );
    }
    assert_eq!(
        kinds(
            &q,
            "UPDATE hr.salaries SET amount = 1 WHERE employee_id = 2"
        ),
        vec![col(&hr("salaries"), "employee_id", Verb::Select)]
    );
    assert_eq!(
        kinds(&q, "DELETE FROM public.orders"),
        vec![ViolationKind::TablePrivilege {
            table: "public.orders".into(),
            privilege: Verb::Delete
        }]
    );
    assert_eq!(
        kinds(&q, "SELECT * FROM hr.employees"),
        vec![ViolationKind::Wildcard {
            table: hr("employees")
        }]
    );
    let v = check("SELECT amount FROM hr.salaries", &q);
    assert!(
        v.iter().any(|v| v.to_string()
            == "table hr.salaries is not readable by role clerk (at `hr.salaries`)"),
        "{:?}",
        v.iter().map(|v| v.to_string()).collect::<Vec<_>>()
    );
}

#[test]
fn column_privileges_per_verb() {
    let a = analyst();
    // salaries: the analyst may read employee_id and update amount, not read it.
    assert_eq!(
        kinds(&a, "SELECT amount FROM salaries"),
        vec![col("salaries", "amount", Verb::Select)]
    );
    assert_eq!(
        kinds(&a, "SELECT e.name FROM employees e JOIN salaries s ON s.employee_id = e.id ORDER BY s.amount"),
        vec![col("salaries", "amount", Verb::Select)]
    );
    assert_eq!(
        kinds(
            &a,
            "WITH x AS (SELECT amount AS a FROM salaries) SELECT a FROM x"
        ),
        vec![col("salaries", "amount", Verb::Select)]
    );
    assert_eq!(
        kinds(&a, "SELECT * FROM salaries"),
        vec![ViolationKind::Wildcard {
            table: "salaries".into()
        }]
    );
    for hidden in [
        "SELECT count(DISTINCT amount) FROM salaries",
        "SELECT employee_id FROM salaries WHERE amount::int > 3",
        "SELECT CAST(amount AS text) FROM salaries",
        "SELECT employee_id FROM salaries GROUP BY employee_id HAVING max(amount) > 0",
        "SELECT name FROM employees e WHERE EXISTS (SELECT 1 FROM salaries s WHERE s.amount > 0 AND s.employee_id = e.id)",
        "SELECT employee_id FROM salaries ORDER BY coalesce(amount, 0)",
        "SELECT rank() OVER (ORDER BY amount) FROM salaries",
        "SELECT employee_id FROM salaries UNION SELECT amount FROM salaries",
    ] {
        assert_eq!(kinds(&a, hidden), vec![col("salaries", "amount", Verb::Select)], "{hidden}");
    }
    clean(&a, "UPDATE salaries SET amount = 0 WHERE employee_id = 3");
    // SET reads what its expression names: amount is not readable.
    assert_eq!(
        kinds(
            &a,
            "UPDATE salaries SET amount = amount * 2 WHERE employee_id = 3"
        ),
        vec![col("salaries", "amount", Verb::Select)]
    );
    assert_eq!(
        kinds(&a, "UPDATE salaries SET employee_id = 4"),
        vec![col("salaries", "employee_id", Verb::Update)]
    );
    assert_eq!(
        kinds(&a, "DELETE FROM orders WHERE id = 1"),
        vec![ViolationKind::TablePrivilege {
            table: "orders".into(),
            privilege: Verb::Delete
        }]
    );
    assert_eq!(
        kinds(&a, "UPDATE orders SET placed = NULL"),
        vec![
            ViolationKind::TablePrivilege {
                table: "orders".into(),
                privilege: Verb::Update
            },
            col("orders", "placed", Verb::Update)
        ]
    );

    let c = clerk();
    clean(
        &c,
        "INSERT INTO orders (employee_id, total) VALUES (1, 2.5)",
    );
    clean(&c, "INSERT INTO orders (id, total) VALUES (DEFAULT, 0)");
    assert_eq!(
        kinds(&c, "INSERT INTO orders (id, total) VALUES (\"default\", 0)"),
        vec![unknown(None, "default")]
    );
    clean(
        &c,
        "INSERT INTO orders (employee_id, total) SELECT id, 0 FROM employees WHERE name = 'x'",
    );
    clean(
        &c,
        "UPDATE orders SET total = total + 1 WHERE note IS NULL RETURNING id",
    );
    assert_eq!(
        kinds(&c, "INSERT INTO orders (note) VALUES ('x')"),
        vec![col("orders", "note", Verb::Insert)]
    );
    // Without a column list the values reach columns the role may not insert into.
    assert_eq!(
        kinds(&c, "INSERT INTO orders VALUES (1, 2, 3, 'x')"),
        vec![ViolationKind::TablePrivilege {
            table: "orders".into(),
            privilege: Verb::Insert
        }]
    );
    assert_eq!(
        kinds(&c, "INSERT INTO employees (name) VALUES ('x')"),
        vec![
            ViolationKind::TablePrivilege {
                table: "employees".into(),
                privilege: Verb::Insert
            },
            col("employees", "name", Verb::Insert)
        ]
    );
    assert_eq!(
        kinds(&c, "SELECT * FROM orders"),
        vec![ViolationKind::Wildcard {
            table: "orders".into()
        }]
    );
}

#[test]
fn other_statements_and_garbage_are_named() {
    let a = analyst();
    assert!(
        matches!(&kinds(&a, "DROP TABLE orders")[..], [ViolationKind::UnsupportedStatement { what }] if what == "DROP")
    );
    assert_eq!(
        kinds(&a, "SELECT 1; SELECT 2"),
        vec![ViolationKind::StatementCount { count: 2 }]
    );
    assert_eq!(
        kinds(&a, ""),
        vec![ViolationKind::StatementCount { count: 0 }]
    );
    assert!(matches!(
        &kinds(&a, "SELEC name FROM")[..],
        [ViolationKind::Unparsable { .. }]
    ));
    assert!(matches!(
        &kinds(&a, "SELECT name FROM employees FOR UPDATE")[..],
        [ViolationKind::Unsupported { .. }]
    ));
    assert!(matches!(
        &kinds(&a, "SELECT name INTO copy FROM employees")[..],
        [ViolationKind::Unsupported { .. }]
    ));
    let deep = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(
        !check(&deep, &a).is_empty(),
        "deep nesting is refused, not a crash"
    );
}

#[test]
fn messages_quote_back_to_the_model() {
    let a = analyst();
    let v = check("SELECT s.amount FROM salaries s", &a);
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0].to_string(),
        "column salaries.amount is not readable by role analyst (at `s.amount`)"
    );
    let v = check("SELECT x FROM employees", &a);
    assert_eq!(
        v[0].to_string(),
        "column x is not a column of any table in scope visible to role analyst (at `x`); \
         in scope: employees"
    );
    let v = check("DELETE FROM orders", &a);
    assert_eq!(
        v[0].to_string(),
        "table orders is not deletable by role analyst (at `orders`)"
    );
    let v = check("SELECT * FROM payroll", &a);
    assert_eq!(
        v[0].to_string(),
        "relation payroll does not exist or is not visible to role analyst (at `payroll`)"
    );
}

/// A column that does not bind is quoted back with where the role's schema has it, so a
/// repair can join the right table; the hint lists only what the snapshot (the role's
/// prompt) holds.
#[test]
fn unknown_columns_say_where_the_column_is() {
    let c = clerk();
    let msg = |sql: &str| {
        let v = check(sql, &c);
        assert_eq!(v.len(), 1, "{sql}: {v:?}");
        v[0].to_string()
    };
    assert_eq!(
        msg("SELECT e.total FROM employees AS e JOIN orders o ON o.employee_id = e.id"),
        "column e.total does not exist or is not visible to role clerk (at `e.total`); \
         e (employees) has id, name; total is a column of orders"
    );
    assert_eq!(
        msg("SELECT total FROM employees"),
        "column total is not a column of any table in scope visible to role clerk (at `total`); \
         in scope: employees; total is a column of orders"
    );
    // A name no visible relation has: only what is in scope.
    assert_eq!(
        msg("SELECT salary FROM employees e"),
        "column salary is not a column of any table in scope visible to role clerk (at `salary`); \
         in scope: e (employees)"
    );
    // In a subquery, the enclosing scope counts too, innermost first.
    let m = msg(
        "SELECT name FROM employees WHERE id IN (SELECT employee_id FROM orders WHERE nom = 1)",
    );
    assert!(m.ends_with("in scope: orders, employees"), "{m}");
}

/// Issue 33, item 4: a name the model invented is quoted as a short prefix, and the
/// message offers the role's relations and columns most like it (and nothing else).
#[test]
fn invented_names_are_quoted_short_with_what_is_closest_instead() {
    let c = clerk();
    let msg = |sql: &str| {
        let v = check(sql, &c);
        assert_eq!(v.len(), 1, "{sql}: {v:?}");
        v[0].to_string()
    };
    let long = "salary_column_name_here_from_employees_table_here_or_another_10";
    let m = msg(&format!("SELECT {long}.employee_id FROM orders"));
    assert!(!m.contains(long), "{m}");
    assert!(m.contains("salary_column_name_here_..."), "{m}");
    let m = msg("SELECT employee.name FROM employees");
    assert_eq!(
        m,
        "relation employee does not exist or is not visible to role clerk (at `employee.name`); \
         closest relations: employees"
    );
    // Nothing alike: no offer.
    let v = check("SELECT d.dept FROM department AS d", &c);
    assert_eq!(
        v[0].to_string(),
        "relation department does not exist or is not visible to role clerk (at `department`)"
    );
    let m = msg("SELECT employee_names FROM employees");
    assert_eq!(
        m,
        "column employee_names is not a column of any table in scope visible to role clerk \
         (at `employee_names`); in scope: employees; closest columns: orders.employee_id"
    );
    let m = msg(&format!("SELECT {long} FROM employees"));
    assert!(!m.contains(long), "{m}");
    assert!(m.len() < 200, "{m}");
}

/// A column alias list renames by position; the snapshot lists only the columns a role
/// holds some privilege on, so without a table-level grant the positions cannot be trusted:
/// `employees AS e(a, b)` could name a column the clerk may not see.
#[test]
fn column_alias_lists_need_every_column_visible() {
    let c = clerk();
    let k = kinds(&c, "SELECT e.a FROM employees AS e(a, b)");
    assert!(
        k.iter()
            .any(|v| matches!(v, ViolationKind::Unsupported { what } if what.contains("column alias list"))),
        "{k:?}"
    );
    clean(&c, "SELECT e.name FROM employees AS e");
    clean(&c, "SELECT s.a FROM (SELECT name FROM employees) AS s(a)");
    clean(&analyst(), "SELECT x.a FROM employees AS x(a)");
}

/// What the checker can read at all: one statement.
#[test]
fn the_checker_parses_one_statement() {
    use grid_core::checker::parses;
    assert!(parses("SELECT 1").is_ok());
    assert!(matches!(
        parses("SELECT 1; SELECT 2"),
        Err(ViolationKind::StatementCount { count: 2 })
    ));
    assert!(matches!(
        parses("SELEC 1"),
        Err(ViolationKind::Unparsable { .. })
    ));
}

/// An INSERT whose source ends at its target list before `ON CONFLICT` is PostgreSQL
/// (sqlparser alone cannot read it): the checker reads it, and checks it as it checks any
/// INSERT. A statement that fails elsewhere is not rescued.
#[test]
fn an_insert_source_ending_in_its_target_list_takes_on_conflict() {
    use grid_core::checker::parses;
    for sql in [
        "INSERT INTO orders (total) SELECT 1 ON CONFLICT DO NOTHING",
        "INSERT INTO orders (total) SELECT orders.* ON CONFLICT DO NOTHING",
        "INSERT INTO orders SELECT 1, 2 ON CONFLICT (id) DO NOTHING RETURNING id",
        "INSERT INTO orders (total) SELECT total FROM orders UNION SELECT 'on conflict' ON CONFLICT DO NOTHING",
        "INSERT INTO orders (total) WITH c AS (SELECT 1 AS v) SELECT (SELECT v FROM c) ON CONFLICT DO NOTHING",
        // Keywords in any case, as PostgreSQL reads them.
        "insert into orders (total) select 1 on conflict do nothing",
        "INSERT INTO orders (total) SELECT 1 On Conflict DO NOTHING",
    ] {
        assert!(parses(sql).is_ok(), "{sql}: {:?}", parses(sql));
    }
    let c = clerk();
    clean(
        &c,
        "INSERT INTO orders (employee_id, total) SELECT 1, 0 ON CONFLICT DO NOTHING",
    );
    assert_eq!(
        kinds(
            &c,
            "INSERT INTO orders (note) SELECT 'x' ON CONFLICT DO NOTHING"
        ),
        vec![col("orders", "note", Verb::Insert)]
    );
    for sql in [
        "INSERT INTO orders (total) SELECT 1 FROM orders JOIN employees ON CONFLICT DO NOTHING",
        "INSERT INTO orders (total) SELECT 1 ORDER BY 1 WHERE TRUE ON CONFLICT DO NOTHING",
        "SELECT 1 ON CONFLICT DO NOTHING",
    ] {
        assert!(parses(sql).is_err(), "{sql}");
    }
}

/// PostgreSQL's postfix ISNULL and NOTNULL: the checker reads both (sqlparser reads NOTNULL;
/// the checker writes ISNULL as IS NULL first) and binds the column under them as any
/// other, so a column the role may not read stays refused there. `isnull` where PostgreSQL
/// reads a name (a column after a qualifier, a label after AS, a type after `::`, a
/// function), and in a string, a quoted name or a comment, is left alone.
#[test]
fn postfix_isnull_and_notnull_bind_the_column_under_them() {
    use grid_core::checker::parses;
    let a = analyst();
    clean(
        &a,
        "SELECT name, hired ISNULL AS fresh, dept_id notnull FROM employees \
         WHERE NOT hired ISNULL AND (SELECT max(id) FROM departments) NOTNULL \
         ORDER BY dept_id ISNULL, name",
    );
    let amount = vec![col("salaries", "amount", Verb::Select)];
    for sql in [
        "SELECT employee_id FROM salaries WHERE amount NOTNULL",
        "SELECT employee_id FROM salaries WHERE amount ISNULL",
        "SELECT employee_id FROM salaries s WHERE NOT s.amount isnull",
        "SELECT employee_id, amount + 1 NOTNULL FROM salaries",
        "SELECT employee_id, amount notnull FROM salaries",
        "SELECT CASE WHEN amount ISNULL THEN 0 ELSE 1 END FROM salaries",
        "SELECT employee_id FROM salaries ORDER BY amount NOTNULL DESC",
        "SELECT (SELECT amount FROM salaries LIMIT 1) ISNULL",
        "SELECT employee_id FROM salaries WHERE employee_id NOTNULL AND amount ISNULL",
    ] {
        assert_eq!(kinds(&a, sql), amount, "{sql}");
    }
    // The clerk reads orders' note but may not update it.
    let c = clerk();
    clean(&c, "UPDATE orders SET total = 0 WHERE note ISNULL");
    assert_eq!(
        kinds(&c, "UPDATE orders SET note = total NOTNULL WHERE id ISNULL"),
        vec![col("orders", "note", Verb::Update)]
    );
    // A violation quotes the expression as sqlparser prints it.
    let v = check("SELECT count(*) FROM salaries GROUP BY amount ISNULL", &a);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].fragment.contains("amount"), "{:?}", v[0]);
    // Names: read as PostgreSQL reads them, never as the operator.
    assert_eq!(
        kinds(&a, "SELECT e.isnull FROM employees e"),
        vec![unknown(Some("e"), "isnull")]
    );
    assert_eq!(
        kinds(&a, "SELECT \"isnull\" FROM employees"),
        vec![unknown(None, "isnull")]
    );
    clean(
        &a,
        "SELECT name AS isnull, 'a isnull' FROM employees /* isnull */ -- isnull",
    );
    for sql in [
        "SELECT id::isnull FROM employees",
        "SELECT isnull(name) FROM employees",
        "SELECT CAST(id AS isnull) FROM employees",
    ] {
        assert!(parses(sql).is_ok(), "{sql}: {:?}", parses(sql));
    }
    // An error still points into the statement as written.
    match parses("SELECT name FROM employees WHERE hired ISNULL )") {
        Err(ViolationKind::Unparsable { message }) => {
            assert!(message.contains("Column: 47"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

/// A typed literal whose type name is quoted (`"int2" 'a'`, which PostgreSQL reads as
/// `int2 'a'`) is read, and the columns beside it are bound as ever; a quoted name that
/// folding would change, or a quoted column followed by anything but a string, is left
/// alone.
#[test]
fn a_typed_literal_with_a_quoted_type_name_is_read() {
    use grid_core::checker::parses;
    let a = analyst();
    for sql in [
        "SELECT (\"int2\" '1')",
        "SELECT (LOCALTIMESTAMP ^ \"int2\" '1')",
        "SELECT name FROM employees WHERE id = \"int8\"   '2'",
    ] {
        assert!(parses(sql).is_ok(), "{sql}: {:?}", parses(sql));
    }
    clean(&a, "SELECT name FROM employees WHERE id > \"int4\" '1'");
    assert_eq!(
        kinds(
            &a,
            "SELECT amount FROM salaries WHERE amount > \"numeric\" '1'"
        ),
        vec![col("salaries", "amount", Verb::Select)]
    );
    // A quoted column is still a column.
    assert_eq!(
        kinds(&a, "SELECT \"amount\" FROM salaries"),
        vec![col("salaries", "amount", Verb::Select)]
    );
    // Folding would change `"Int2"`: left quoted, and not read as a type (in a select list
    // sqlparser would take the string for its alias).
    assert!(parses("SELECT (\"Int2\" '1')").is_err());
}
