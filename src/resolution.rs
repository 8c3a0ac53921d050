//! What a generated statement resolves to, as the caller, and whether the caller can
//! trust all of it (docs/security.md, "Whose objects"). The mask and the checker read
//! names; PostgreSQL binds them to objects, and another role's object can carry code
//! that PostgreSQL runs as the caller: a view's query, a row-security policy (a STABLE
//! function in it runs while the statement is merely planned, so under the judge's
//! `EXPLAIN`), a trigger, a default, or an overload that wins a built-in's name
//! (`public.round(integer)` over `pg_catalog.round(numeric)` for `round(id)`).
//!
//! So before anything plans or runs a statement (the judge's `EXPLAIN`, `grid.run()`'s
//! execution, an example's vetting), [`untrusted_objects`] parses, analyses and
//! rewrites it as the caller, under the caller's `search_path` (nothing is planned or
//! executed by that), walks the rewritten trees (views expanded, the caller's
//! row-security quals and check options added, subqueries and CTEs included) and
//! collects every function and operator's function, every relation and every domain
//! they bind. The statement passes only when each of those, and each object the code
//! of those relations and domains names (`grid.relation_code`, domain constraints), is
//! owned by an author the caller trusts (`grid.trusted_author`: the caller, superusers,
//! `grid_curator` members). pg_catalog's built-ins are the bootstrap superuser's.

use std::ffi::{c_void, CString};

use pgrx::pg_sys;
use pgrx::prelude::*;

/// The objects a statement's rewritten query trees bind, by OID.
#[derive(Debug, Default)]
struct Bound {
    functions: Vec<pg_sys::Oid>,
    relations: Vec<pg_sys::Oid>,
    domains: Vec<pg_sys::Oid>,
}

/// `check_functions_in_node`'s callback: records the function, walks on.
#[pg_guard]
unsafe extern "C-unwind" fn record_function(func: pg_sys::Oid, context: *mut c_void) -> bool {
    // SAFETY: `context` is the `Bound` that `bind` passes to the walk.
    let bound = unsafe { &mut *(context as *mut Bound) };
    bound.functions.push(func);
    false
}

/// The tree walker: every node of every query tree, range table entries included
/// (`QTW_EXAMINE_RTES_BEFORE`), sublinks' and CTEs' queries through recursion.
#[pg_guard]
unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: `node` is a node of a query tree that parse analysis built in this
    // backend; `context` is the `Bound` that `bind` passes to the walk.
    unsafe {
        let bound = &mut *(context as *mut Bound);
        match (*node).type_ {
            pg_sys::NodeTag::T_Query => {
                return pg_sys::query_tree_walker(
                    node as *mut pg_sys::Query,
                    Some(walk),
                    context,
                    // The walker sees each range table entry (for its relation) before
                    // the walk goes into its expressions.
                    pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
                );
            }
            pg_sys::NodeTag::T_RangeTblEntry => {
                let rte = node as *mut pg_sys::RangeTblEntry;
                if let Some(relid) = crate::pgversion::bound_relation(rte) {
                    bound.relations.push(relid);
                }
                // The entry's own expressions (function scans, values lists, security
                // quals) are walked by the range table walker after this.
                return false;
            }
            pg_sys::NodeTag::T_CoerceToDomain => {
                let c = node as *mut pg_sys::CoerceToDomain;
                bound.domains.push((*c).resulttype);
            }
            _ => {}
        }
        pg_sys::check_functions_in_node(node, Some(record_function), context);
        pg_sys::expression_tree_walker(node, Some(walk), context)
    }
}

/// Parses, analyses and rewrites `sql` as the current role under the current
/// `search_path`, and collects what its trees bind. Raises PostgreSQL's error for a
/// statement that does not parse or analyse (the caller runs this where an error is
/// caught: in a rolled-back subtransaction).
fn bind(sql: &str) -> Bound {
    let mut bound = Bound::default();
    let Ok(text) = CString::new(sql) else {
        // A NUL cannot be in a statement PostgreSQL reads; SPI refuses it too.
        error!("the statement holds a NUL byte");
    };
    // SAFETY: in a transaction, in the backend's main thread; every list and node is
    // allocated by PostgreSQL in the current memory context and read only here.
    unsafe {
        let raw = pg_sys::raw_parser(text.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        let raws = pgrx::PgList::<pg_sys::RawStmt>::from_pg(raw);
        for stmt in raws.iter_ptr() {
            let queries = pg_sys::pg_analyze_and_rewrite_fixedparams(
                stmt,
                text.as_ptr(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
            );
            let queries = pgrx::PgList::<pg_sys::Query>::from_pg(queries);
            for q in queries.iter_ptr() {
                walk(
                    q as *mut pg_sys::Node,
                    &mut bound as *mut Bound as *mut c_void,
                );
            }
        }
    }
    bound
}

/// What the caller cannot trust among what `sql` binds: one line per object, `kind
/// name (owner role)`, sorted; empty when the statement may be planned and run. Run it
/// as the caller under the caller's `search_path`, in the subtransaction that then plans
/// or runs the statement (so that what was checked is what runs).
pub(crate) fn untrusted_objects(sql: &str) -> Result<Vec<String>, pgrx::spi::Error> {
    let bound = bind(sql);
    let oids =
        |v: &[pg_sys::Oid]| -> Vec<i64> { v.iter().map(|o| i64::from(o.to_u32())).collect() };
    let (functions, relations, domains) = (
        oids(&bound.functions),
        oids(&bound.relations),
        oids(&bound.domains),
    );
    UNTRUSTED_PLAN.with(|kept| {
        Spi::connect(|c| {
            let plan: &'static pgrx::spi::OwnedPreparedStatement = match kept.get() {
                Some(plan) => plan,
                None => {
                    let int8s = pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::INT8ARRAYOID);
                    let plan = c.prepare(UNTRUSTED_QUERY, &[int8s, int8s, int8s])?.keep();
                    // Kept for the backend's life: never dropped, so no SPI_freeplan runs
                    // while the process exits.
                    let plan = Box::leak(Box::new(plan));
                    // The cell was empty a moment ago, and this backend has one thread.
                    let _ = kept.set(plan);
                    plan
                }
            };
            let rows = c.select(
                plan,
                Some(1),
                &[functions.into(), relations.into(), domains.into()],
            )?;
            let mut found = Vec::new();
            for r in rows {
                found = r.get::<Vec<String>>(1)?.unwrap_or_default();
            }
            Ok(found)
        })
    })
}

thread_local! {
    /// [`UNTRUSTED_QUERY`], planned once per backend and kept: a judge runs it for every
    /// candidate an ask vets (twelve with three examples) and `grid.run()` once more, and
    /// planning it cost more than running it. PostgreSQL's plan cache plans a kept
    /// statement again when a catalog it reads changes; every name in it is qualified,
    /// so the caller's `search_path` does not change what it means.
    static UNTRUSTED_PLAN: std::cell::OnceCell<&'static pgrx::spi::OwnedPreparedStatement> =
        const { std::cell::OnceCell::new() };
}

/// `$1` functions, `$2` relations, `$3` domains (bigint[] of OIDs): the objects whose
/// owner the caller does not trust, and the objects the code of those relations
/// (`grid.relation_code`) and domains (their constraints) names whose owner it does not
/// trust. Every operator is schema-qualified (a bare `=`, `IN` or `CASE x WHEN` would
/// resolve under the caller's `search_path`, which it runs under).
const UNTRUSTED_QUERY: &str = "
WITH bound AS (
    SELECT 'function' AS kind,
           pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                             pg_catalog.pg_get_function_identity_arguments(p.oid)) AS name,
           p.proowner AS owner
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE p.oid::pg_catalog.int8 OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])
    UNION ALL
    SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'v' THEN 'view'
                WHEN c.relkind OPERATOR(pg_catalog.=) 'm' THEN 'materialized view'
                ELSE 'relation' END,
           pg_catalog.format('%I.%I', n.nspname, c.relname), c.relowner
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE c.oid::pg_catalog.int8 OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.int8[])
    UNION ALL
    SELECT 'type', pg_catalog.format('%I.%I', n.nspname, t.typname), t.typowner
      FROM pg_catalog.pg_type t
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) t.typnamespace
     WHERE t.oid::pg_catalog.int8 OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.int8[])
),
code AS (
    SELECT rc.refclassid, rc.refobjid, rc.owner
      FROM grid.relation_code rc
     WHERE rc.relid::pg_catalog.int8 OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.int8[])
    UNION ALL
    SELECT d.refclassid, d.refobjid, p.proowner
      FROM pg_catalog.pg_constraint con
      JOIN pg_catalog.pg_depend d
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) con.oid
      JOIN pg_catalog.pg_proc p
        ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND p.oid OPERATOR(pg_catalog.=) d.refobjid
     WHERE con.contypid::pg_catalog.int8 OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.int8[])
),
named AS (
    SELECT kind, name, owner FROM bound
    UNION ALL
    SELECT 'code naming ' OPERATOR(pg_catalog.||)
           pg_catalog.pg_describe_object(code.refclassid, code.refobjid, 0),
           '', code.owner
      FROM code
)
SELECT coalesce(pg_catalog.array_agg(DISTINCT pg_catalog.btrim(pg_catalog.format('%s %s', n.kind, n.name))
                    OPERATOR(pg_catalog.||) pg_catalog.format(' (owner %s)',
                        coalesce(pg_catalog.pg_get_userbyid(n.owner)::pg_catalog.text, 'unknown'))),
                '{}')
  FROM named n
 WHERE NOT coalesce(grid.trusted_author(n.owner), false)";

/// The refusal of a statement that binds `untrusted` objects (SQLSTATE 42501): the
/// judge's verdict, which the pipeline sanitizes before the model or the asker reads
/// it, and `grid.run()`'s error.
pub(crate) fn refusal(untrusted: &[String]) -> String {
    format!(
        "untrusted code: {}; the asker runs only objects of authors it trusts",
        untrusted.join(", ")
    )
}

/// What a DBA does about a refusal: the hint beside [`refusal`] in `grid.run()`.
pub(crate) const REFUSAL_HINT: &str = "Objects whose owner is not the asker, a superuser or a \
     member of grid_curator are never planned or run for the asker (grid.trusted_author). A DBA \
     who vouches for the owner grants it grid_curator.";
