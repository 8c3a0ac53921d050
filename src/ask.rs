//! `grid.ask(question)`: the backend's half of a generation. It checks the question,
//! gathers what the decode loop needs from the caller's session (the catalog snapshot as
//! the caller, who is asking, the `grid.*` settings) and sends it to the mask worker,
//! which runs the decode loop and writes the audit. The API key never passes through the
//! backend: the worker reads it from its own configuration.

use crate::question::check_question;
use crate::subtransaction::{in_rolled_back_subtransaction, without_terminator, SET_SEARCH_PATH};

fn set_search_path(what: &str, path: &str) {
    use pgrx::prelude::*;
    if let Err(e) = Spi::run_with_args(SET_SEARCH_PATH, &[path.into()]) {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("{what}: setting search_path: {e}"),
        );
    }
}

/// The functions of the engine's allow-list ([`grid_core::lexicon::DEFAULT_FUNCTIONS`])
/// of which the caller may execute no overload: a DBA who revokes EXECUTE on one takes
/// it out of the caller's mask, as a REVOKE on a table does. Names with no function in
/// pg_catalog (aggregates are functions there; `coalesce` is syntax) are never denied.
fn denied_functions(what: &str) -> Vec<String> {
    use pgrx::prelude::*;
    let names: Vec<String> = grid_core::lexicon::DEFAULT_FUNCTIONS
        .iter()
        .map(|s| s.to_string())
        .collect();
    match Spi::get_one_with_args::<Vec<String>>(
        "SELECT coalesce(array_agg(f.name ORDER BY f.name), '{}')
           FROM unnest($1::text[]) AS f(name)
          WHERE EXISTS (SELECT FROM pg_proc p
                         WHERE p.pronamespace = 'pg_catalog'::regnamespace
                           AND p.proname = f.name)
            AND NOT EXISTS (SELECT FROM pg_proc p
                             WHERE p.pronamespace = 'pg_catalog'::regnamespace
                               AND p.proname = f.name
                               AND has_function_privilege(p.oid, 'EXECUTE'))",
        &[names.into()],
    ) {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("{what}: reading function privileges: {e}"),
        ),
    }
}

/// Refuses an ask whose `grid.timeout` or `grid.max_tokens` is above the DBA's ceiling
/// (`grid.timeout_limit`, `grid.max_tokens_limit`), unless the caller is a superuser:
/// every role's asks share the worker, and one role's long asks must not hold it.
fn within_ceilings(what: &str) {
    use crate::guc;
    // SAFETY: a catalog lookup for the current user, in a transaction.
    if unsafe { pgrx::pg_sys::superuser() } {
        return;
    }
    let ms = |d: std::time::Duration| d.as_millis();
    let (timeout, limit) = (guc::timeout(), guc::timeout_limit());
    if timeout > limit {
        above_ceiling(
            what,
            "grid.timeout",
            format!("{} ms", ms(timeout)),
            format!("{} ms", ms(limit)),
        );
    }
    let (tokens, limit) = (guc::max_tokens(), guc::max_tokens_limit());
    if tokens > limit {
        above_ceiling(
            what,
            "grid.max_tokens",
            tokens.to_string(),
            limit.to_string(),
        );
    }
}

/// The error of a `setting` whose `value` is above its ceiling `<setting>_limit`.
fn above_ceiling(what: &str, setting: &str, value: String, limit: String) -> ! {
    use pgrx::prelude::*;
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "{what}: {setting} is {value}, above {setting}_limit ({limit}), the most a DBA lets \
             this role ask with"
        ),
        format!(
            "SET {setting} to at most {setting}_limit, or have a DBA raise the limit for the \
             role (ALTER ROLE ... SET {setting}_limit)."
        )
    );
}

/// Refuses a snapshot with more relations or columns than `grid.max_snapshot_relations`
/// or `grid.max_snapshot_columns` (SQLSTATE 54000), before the worker is asked and
/// before its hints and descriptions are read: what one role may use bounds what its ask
/// costs everyone. Only trusted objects are in it, so another role cannot push an asker
/// over a bound by granting it objects.
fn within_counts(what: &str, snapshot: &serde_json::Value) {
    let (max_relations, max_columns, _) = crate::guc::snapshot_bounds();
    let relations = snapshot["relations"].as_array().map_or(0, Vec::len);
    if relations > max_relations {
        above_bound(
            what,
            "relations",
            relations,
            "grid.max_snapshot_relations",
            max_relations,
        );
    }
    let columns: usize = snapshot["relations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["columns"].as_array().map_or(0, Vec::len))
        .sum();
    if columns > max_columns {
        above_bound(
            what,
            "columns",
            columns,
            "grid.max_snapshot_columns",
            max_columns,
        );
    }
}

/// Refuses a snapshot, hints and descriptions in, that encodes to more than
/// `grid.max_snapshot_size` bytes (SQLSTATE 54000), before the worker is asked.
fn within_size(what: &str, snapshot: &serde_json::Value) {
    let (_, _, max_bytes) = crate::guc::snapshot_bounds();
    let bytes = serde_json::to_vec(snapshot).map_or(0, |v| v.len());
    if bytes > max_bytes {
        above_bound(what, "bytes", bytes, "grid.max_snapshot_size", max_bytes);
    }
}

/// The error of a snapshot holding `n` `unit`s, above `setting`'s `max`.
fn above_bound(what: &str, unit: &str, n: usize, setting: &str, max: usize) -> ! {
    use pgrx::prelude::*;
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!("{what}: what this role may use holds {n} {unit}, above {setting} ({max} {unit})"),
        format!(
            "A DBA raises {setting} (for the role: ALTER ROLE ... SET {setting}), or the role is \
             granted fewer relations or columns."
        )
    );
}

/// Says (a NOTICE) which relations the caller may use are left out of its language
/// because their owner, or code attached to them, is not of an author it trusts
/// (docs/security.md, "Whose objects"): a DBA who installs grid_pg over an application
/// schema owned by an ordinary role learns at the first ask what to vouch for. Nothing in
/// it is hidden from the caller: the catalogs it reads say as much.
fn tell_left_out(what: &str, left_out: Option<serde_json::Value>) {
    let Some(found) = left_out else {
        return;
    };
    let n = found[0].as_i64().unwrap_or(0);
    if n == 0 {
        return;
    }
    let owners: Vec<String> = found[1]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o.as_str())
        .take(3)
        .map(|o| grid_core::message::ascii(o).into_owned())
        .collect();
    let more = if found[1].as_array().map_or(0, Vec::len) > 3 {
        ", ..."
    } else {
        ""
    };
    pgrx::notice!(
        "{what}: {n} relation(s) this role may use are left out of its language: they are owned \
         by, or carry code of, roles it does not trust as authors (owners: {}{more}). A DBA who \
         vouches for an owner grants it grid_curator (docs/security.md, \"Whose objects\").",
        owners.join(", ")
    );
}

/// Sends `question` to the worker as the caller and returns the generated statement, or
/// raises the worker's error. `what` names the SQL function for messages.
pub fn generate(what: &str, question: &str, explain: bool) -> grid_ask::Generated {
    send(what, prepare(what, question, explain, Purpose::Ask))
}

/// What an ask is prepared for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// To put to the model: the snapshot with the descriptions and value hints the
    /// prompt shows, the curated examples offered.
    Ask,
    /// To check a statement against the caller's language only: the snapshot as the
    /// language reads it, and no NOTICE about what is left out of it.
    Language,
}

/// An ask as the caller makes it, ready for the worker.
pub struct Prepared {
    pub ask: grid_ask::Ask,
    /// The caller's `search_path`, under which its statements are judged and run.
    pub caller_path: String,
}

/// The ask of `question` as the caller: its catalog snapshot (taken as the caller, under
/// its path), policy, identity and settings (see [`Purpose`]). Raises what stops it.
pub fn prepare(what: &str, question: &str, explain: bool, purpose: Purpose) -> Prepared {
    use crate::error::raise;
    use crate::guc;
    use crate::worker::require_store_database;
    use grid_ask::{Ask, AskSettings};
    use pgrx::prelude::*;

    fn one<T: IntoDatum + FromDatum>(what: &str, query: &str) -> Option<T> {
        match Spi::get_one::<T>(query) {
            Ok(v) => v,
            Err(e) => raise(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("{what}: {e}"),
            ),
        }
    }

    if purpose == Purpose::Ask {
        if let Err(e) = check_question(question) {
            raise(e.sqlstate(), e.to_string().replacen("grid.ask", what, 1));
        }
    }
    require_store_database(what);
    within_ceilings(what);
    // What the caller reaches unqualified is offered unqualified: the schemas of its
    // path, resolved under that path for this one query.
    let pinned = one::<String>(what, "SELECT pg_catalog.current_setting('search_path')");
    let caller_path = crate::caller::search_path();
    set_search_path(what, &caller_path);
    let schemas = one::<Vec<String>>(
        what,
        "SELECT pg_catalog.current_schemas(false)::pg_catalog.text[]",
    )
    .unwrap_or_default();
    set_search_path(what, pinned.as_deref().unwrap_or("pg_catalog, pg_temp"));
    // The query of grid.catalog_snapshot(), run here so that EXECUTE on grid.ask()
    // alone lets a role ask.
    let read = match crate::catalog::read_snapshot(Some(schemas.into_iter().map(Some).collect())) {
        Ok(read) => read,
        Err(e) => raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("{what}: reading the catalog: {e}"),
        ),
    };
    let mut snapshot = read.snapshot.unwrap_or_default();
    within_counts(what, &snapshot);
    if purpose == Purpose::Ask {
        tell_left_out(what, read.left_out);
        let shown_values = crate::descriptions::add(what, &mut snapshot);
        crate::value_hints::add(what, &mut snapshot, &caller_path, &shown_values);
    }
    within_size(what, &snapshot);
    let denied = denied_functions(what);
    if !denied.is_empty() {
        if let Some(s) = snapshot.as_object_mut() {
            s.insert("denied_functions".into(), serde_json::json!(denied));
        }
    }
    let who = one::<pgrx::JsonB>(
        what,
        "SELECT pg_catalog.jsonb_build_array(session_user, current_user, pg_catalog.current_database())",
    )
    .map(|j| j.0)
    .unwrap_or_default();
    // The caller's own row (row security shows each role its own), read with write verbs
    // opt-in: the worker is sent the policy that governs the ask, never a missing row.
    let row = one::<pgrx::JsonB>(
        what,
        "SELECT (SELECT policy FROM grid.policy WHERE role_name OPERATOR(pg_catalog.=) current_user)",
    )
    .map(|j| j.0);
    let policy = match grid_core::Policy::for_asker(row.as_ref()) {
        Ok(p) => p,
        Err(e) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{what}: the grid.policy row of the calling role cannot be used: {e}"),
        ),
    };
    let text = |i: usize| who[i].as_str().unwrap_or_default().to_string();
    // Vetted in the worker, each candidate judged as the caller like a statement.
    let offered = match purpose {
        Purpose::Ask => crate::examples::offered(what, question),
        Purpose::Language => None,
    };
    let settings = AskSettings {
        endpoint: guc::endpoint(),
        model: guc::model(),
        max_tokens: guc::max_tokens(),
        temperature: guc::temperature(),
        timeout_ms: u64::try_from(guc::timeout().as_millis()).unwrap_or(u64::MAX),
        audit: guc::audit(),
        ablation: guc::ablation(),
        fault: guc::debug_fault(),
        judge: guc::judge(),
        decline: guc::decline(),
    };
    let ask = Ask {
        question: question.to_string(),
        snapshot,
        session_user: text(0),
        current_user: text(1),
        database: text(2),
        policy: serde_json::to_value(&policy).ok(),
        explain,
        settings,
        examples: Vec::new(),
        offered,
        parsed: None,
    };
    Prepared { ask, caller_path }
}

/// Sends a prepared ask to the worker and returns the generated statement, or raises the
/// worker's error.
pub fn send(what: &str, prepared: Prepared) -> grid_ask::Generated {
    use crate::guc;
    use crate::worker::protocol::{Request, Response};
    use crate::worker::{request_judged, unexpected};

    let Prepared { ask, caller_path } = prepared;
    // grid.timeout bounds the whole generation in the worker; the margin lets the
    // worker's own answer (a timeout error, with its audit rows stored) arrive first.
    let wait = guc::timeout().saturating_add(std::time::Duration::from_secs(2));
    let ask = Request::Ask(ask);
    // Each statement the worker's pipeline accepts, and each offered example the
    // caller's language admits, comes back here to be judged as the caller, under the
    // caller's path, before it is returned or shown.
    let mut judge = |c: &grid_ask::Candidate| crate::judge::judge(c, &caller_path);
    match request_judged(what, &ask, wait, Some(&mut judge)) {
        Response::Generated(g) => {
            if let (Some(first), None) = (g.repaired_from, &g.refused) {
                pgrx::notice!(
                    "{what}: the model's first statement (generation {first}) was refused ({}); \
                     this is its repair (generation {})",
                    grid_core::message::ascii(&g.repair_reasons.join("; ")),
                    g.generation
                );
            }
            g
        }
        other => unexpected(what, &other),
    }
}

/// The NOTICE that comes with a write statement `grid.ask()` returns: it names what
/// running it changes (ASCII, like every message that quotes generated text).
pub fn write_notice(w: &grid_core::statement::Write) -> String {
    format!(
        "grid.ask: the statement returned writes ({} on {}): running it changes that table",
        w.verb_sql(),
        grid_core::message::ascii(&w.target)
    )
}

/// Longest run of a generated statement under `grid.run()` when the caller has no
/// `statement_timeout` of its own.
const RUN_TIMEOUT_MS: i32 = 30_000;

/// Longest reading of the audit store for `grid.run` when the caller has no
/// `statement_timeout`.
const ANSWER_READ_TIMEOUT_MS: i32 = 10_000;

/// Raises unless `max_rows` is at least 1.
fn check_max_rows(max_rows: i32) {
    if max_rows < 1 {
        crate::error::raise(
            pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("grid.run: max_rows must be at least 1 (got {max_rows})"),
        );
    }
}

/// The statement of `generation` if it is an answer given to `role` (`grid.answers`,
/// read as the store's owner: the caller may not read the store).
fn answer_of(what: &str, generation: i64, role: &str) -> Option<String> {
    use pgrx::prelude::*;
    let read = crate::store::read_as_owner("grid.generations", ANSWER_READ_TIMEOUT_MS, || {
        Spi::connect(|c| {
            let rows = c.select(
                "SELECT a.sql FROM grid.answers a
                  WHERE a.generation OPERATOR(pg_catalog.=) $1
                    AND a.role_name OPERATOR(pg_catalog.=) $2",
                Some(1),
                &[generation.into(), role.into()],
            )?;
            let mut found = None;
            for r in rows {
                found = r.get::<String>(1)?;
            }
            Ok(found)
        })
    });
    match read {
        Ok(sql) => sql,
        Err(e) => crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("{what}: reading the answers: {e}"),
        ),
    }
}

/// The generation and statement of the role's last ask when it is an answer and that ask
/// had the same [`grid_ask::Ask::reuse_key`] as `ask`.
fn last_answer(what: &str, ask: &grid_ask::Ask) -> Option<(i64, String)> {
    use pgrx::prelude::*;
    let key = ask.reuse_key().to_vec();
    let read = crate::store::read_as_owner("grid.generations", ANSWER_READ_TIMEOUT_MS, || {
        Spi::connect(|c| {
            let rows = c.select(
                "SELECT a.generation, a.sql
                   FROM (SELECT g.generation, g.ask_key FROM grid.generations g
                          WHERE g.current_user_name OPERATOR(pg_catalog.=) $1
                          ORDER BY g.current_user_name DESC, g.entry DESC LIMIT 1) last
                   JOIN grid.answers a ON a.generation OPERATOR(pg_catalog.=) last.generation
                  WHERE last.ask_key OPERATOR(pg_catalog.=) $2",
                Some(1),
                &[ask.current_user.as_str().into(), key.into()],
            )?;
            let mut found = None;
            for r in rows {
                if let (Some(g), Some(sql)) = (r.get::<i64>(1)?, r.get::<String>(2)?) {
                    found = Some((g, sql));
                }
            }
            Ok(found)
        })
    });
    match read {
        Ok(found) => found,
        Err(e) => crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("{what}: reading the role's last answer: {e}"),
        ),
    }
}

/// Why `sql` is not in the language of the caller whose ask `ask` is (its snapshot and
/// policy), asked of the worker that keeps the language; `None` when it is. What
/// `grid.run(generation)` asks of a stored statement and `grid.feedback` of a correction.
pub(crate) fn refusal_now(what: &str, sql: &str, ask: &grid_ask::Ask) -> Option<String> {
    use crate::worker::protocol::{Admits, Request, Response};
    let request = Request::Admits(Admits {
        sql: sql.to_string(),
        snapshot: ask.snapshot.clone(),
        policy: ask.policy.clone(),
        current_user: ask.current_user.clone(),
    });
    let wait = crate::guc::timeout();
    match crate::worker::request_judged(what, &request, wait, None) {
        Response::Admitted { refusal } => refusal,
        other => crate::worker::unexpected(what, &other),
    }
}

/// Records the run in `grid.runs` (through the worker, committed before the statement
/// runs), then runs `sql` read-only as the caller ([`run_read_only`]) and returns its
/// rows. A write statement is refused. `who` is (session_user, current_user), as the
/// ask read them.
fn run_answer(
    what: &str,
    (generation, sql): (i64, &str),
    called_as: &str,
    who: (&str, &str),
    max_rows: i32,
    caller_path: &str,
) -> pgrx::iter::SetOfIterator<'static, pgrx::JsonB> {
    use crate::worker::protocol::{Request, Response, RunRecord};
    use pgrx::prelude::*;
    if let Some(w) = grid_core::statement::write_of(sql) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            format!(
                "grid.run runs read-only statements; the generated statement writes \
                 ({} on {}): {}",
                w.verb_sql(),
                grid_core::message::ascii(&w.target),
                grid_core::message::ascii_snippet(sql, 200)
            ),
            "Use grid.ask() for its text, read it, and run it yourself."
        );
    }
    if called_as == "reused" {
        pgrx::notice!(
            "{what}: the role's last ask was this question, under the same catalog, policy and \
             settings: its answer (generation {generation}) is run, and the model is not asked \
             again"
        );
    }
    let record = Request::RecordRun(RunRecord {
        generation,
        session_user: who.0.to_string(),
        current_user: who.1.to_string(),
        called_as: called_as.to_string(),
    });
    match crate::worker::request_judged(what, &record, crate::guc::timeout(), None) {
        Response::Recorded { .. } => {}
        other => crate::worker::unexpected(what, &other),
    }
    let rows = match run_read_only(without_terminator(sql), max_rows, caller_path) {
        serde_json::Value::Array(rows) => rows,
        _ => Vec::new(),
    };
    SetOfIterator::new(rows.into_iter().map(pgrx::JsonB))
}

/// The session-level advisory locks this backend holds, one row per lock and mode, as
/// the calls that release one hold of it.
fn advisory_locks() -> Vec<String> {
    use pgrx::prelude::*;
    // A lock taken with one bigint key has objsubid 1 (classid: high half, objid: low
    // half); with two int keys, objsubid 2.
    let query = "SELECT coalesce(pg_catalog.array_agg(pg_catalog.format(
                     CASE WHEN l.mode = 'ShareLock' THEN 'pg_catalog.pg_advisory_unlock_shared(%s)'
                          ELSE 'pg_catalog.pg_advisory_unlock(%s)' END,
                     CASE WHEN l.objsubid = 1
                          THEN ((l.classid::pg_catalog.int8 << 32) | l.objid::pg_catalog.int8)::text
                          ELSE pg_catalog.format('%s, %s', l.classid::pg_catalog.int4, l.objid::pg_catalog.int4)
                     END) ORDER BY 1), '{}')
                   FROM pg_catalog.pg_locks l
                  WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid()
                    AND l.granted";
    Spi::get_one::<Vec<String>>(query)
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Releases the session-level advisory locks taken since `before` was read (every hold
/// of each, however many the statement took, so that a lock taken twice is gone too);
/// locks the caller held before are left as they were. A statement can take one through
/// a function a trusted view calls.
fn release_advisory_locks(before: &[String]) {
    let unlock = |call: &str| {
        if let Err(e) = pgrx::Spi::run(&format!("SELECT {call}")) {
            crate::error::raise(
                pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("grid.run: releasing the statement's advisory locks: {e}"),
            );
        }
    };
    if before.is_empty() {
        // Nothing of the caller's to keep: every hold of every lock goes at once.
        unlock("pg_catalog.pg_advisory_unlock_all()");
        return;
    }
    // Each round releases one hold of each lock taken; taking a hold cost the statement
    // at least what releasing it costs here, so the rounds are bounded by its own time.
    loop {
        let taken: Vec<String> = advisory_locks()
            .into_iter()
            .filter(|l| !before.contains(l))
            .collect();
        if taken.is_empty() {
            break;
        }
        for call in &taken {
            unlock(call);
        }
    }
}

/// Runs the read-only `sql` as the caller ([`in_rolled_back_subtransaction`], bounded
/// by [`RUN_TIMEOUT_MS`] when the caller has no `statement_timeout`) and returns at most
/// `max_rows` rows as one jsonb array. What it binds is checked first, in the same
/// subtransaction ([`crate::resolution`]): another role's code never runs, judged or not.
/// It leaves nothing behind: the subtransaction is rolled back after the rows are read
/// (every `set_config`, `application_name` included, with it), and the advisory locks
/// the statement took at session level are released.
fn run_read_only(sql: &str, max_rows: i32, search_path: &str) -> serde_json::Value {
    use pgrx::prelude::*;
    let query = format!(
        "SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(r)), '[]') \
         FROM (SELECT * FROM ({sql}) AS q LIMIT {max_rows}) AS r"
    );
    let locks_before = advisory_locks();
    let rows = in_rolled_back_subtransaction(search_path, RUN_TIMEOUT_MS, || {
        let untrusted = crate::resolution::untrusted_objects(sql)?;
        if !untrusted.is_empty() {
            return Ok(Err(untrusted));
        }
        Spi::get_one::<pgrx::JsonB>(&query).map(Ok)
    });
    release_advisory_locks(&locks_before);
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => e.rethrow(),
    };
    match rows {
        Ok(Ok(v)) => v.map(|j| j.0).unwrap_or_default(),
        Ok(Err(untrusted)) => {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "grid.run: {}",
                    grid_core::message::ascii(&crate::resolution::refusal(&untrusted))
                ),
                crate::resolution::REFUSAL_HINT
            );
        }
        Err(e) => crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("grid.run: {e}"),
        ),
    }
}

#[pgrx::pg_schema]
mod grid {
    use pgrx::prelude::*;

    /// `grid.run(question, max_rows)`: generates like `grid.ask()`, then runs the
    /// statement as the caller, read-only, bounded in time (the caller's
    /// `statement_timeout`, else 30 s) and rows, and returns each row as jsonb. A write
    /// statement is not run: `grid.ask()` gives its text. The statement runs under the
    /// caller's `search_path` (its names are the caller's). When the role's last ask
    /// was this question under the same catalog snapshot, policy and settings
    /// (`grid_ask::Ask::reuse_key`), its answer is run and the model is not asked again:
    /// what the caller read is what runs. `grid.runs` records every run.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn run(question: &str, max_rows: default!(i32, 1000)) -> SetOfIterator<'static, pgrx::JsonB> {
        super::check_max_rows(max_rows);
        let prepared = super::prepare("grid.run", question, false, super::Purpose::Ask);
        let caller_path = prepared.caller_path.clone();
        let who = (
            prepared.ask.session_user.clone(),
            prepared.ask.current_user.clone(),
        );
        let (generation, sql, called_as) = match super::last_answer("grid.run", &prepared.ask) {
            Some((generation, sql)) => (generation, sql, "reused"),
            None => {
                let g = super::send("grid.run", prepared);
                (
                    i64::try_from(g.generation).unwrap_or(i64::MAX),
                    g.sql,
                    "asked",
                )
            }
        };
        super::run_answer(
            "grid.run",
            (generation, &sql),
            called_as,
            (&who.0, &who.1),
            max_rows,
            &caller_path,
        )
    }

    /// `grid.run(generation, max_rows)`: runs exactly the statement that generation
    /// returned to the caller (`grid.my_answers` lists them), as `grid.run(question)`
    /// runs one, without asking the model. The generation must be an answer given to
    /// the calling role, and its statement must still be in the role's language and pass
    /// the checker now (grants and the catalog may have changed since); `grid.runs`
    /// records the run.
    #[pg_extern(security_invoker, volatile, name = "run")]
    #[search_path(pg_catalog, pg_temp)]
    fn run_generation(
        generation: i64,
        max_rows: default!(i32, 1000),
    ) -> SetOfIterator<'static, pgrx::JsonB> {
        const WHAT: &str = "grid.run";
        super::check_max_rows(max_rows);
        // The caller's snapshot and policy, as an ask takes them (the store's database
        // required): who the caller is, and the language the statement must still be in.
        let prepared = super::prepare(WHAT, "", false, super::Purpose::Language);
        let ask = &prepared.ask;
        let Some(sql) = super::answer_of(WHAT, generation, &ask.current_user) else {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "grid.run: generation {generation} is not a statement grid_pg returned to \
                     the current role"
                ),
                "SELECT generation, question, sql FROM grid.my_answers lists the role's answers."
            );
        };
        if let Some(why) = super::refusal_now(WHAT, &sql, ask) {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "grid.run: the statement of generation {generation} is no longer one the \
                     current role may be given: {}",
                    grid_core::message::ascii(&why)
                ),
                "Its grants or the catalog changed since it was written: ask again."
            );
        }
        super::run_answer(
            WHAT,
            (generation, &sql),
            "generation",
            (&ask.session_user, &ask.current_user),
            max_rows,
            &prepared.caller_path,
        )
    }

    /// `grid.ask(question)`: the SQL the calling role may run for `question`, generated
    /// under its privileges and audited. SECURITY INVOKER: the catalog snapshot is the
    /// caller's. Pinned like every grid function; what the caller reaches unqualified
    /// (its own `search_path`, read by `caller`) is offered unqualified.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn ask(question: &str) -> String {
        let sql = super::generate("grid.ask", question, false).sql;
        if let Some(w) = grid_core::statement::write_of(&sql) {
            pgrx::notice!("{}", super::write_notice(&w));
        }
        sql
    }

    /// `grid.explain(question)`: generates like `grid.ask()` and returns one row per
    /// decoding step: the token, how many tokens the mask allowed and blocked, and whether
    /// the token was sampled, forced (the only legal one), the end of the statement, or
    /// written by budget completion. Audited like any ask. A statement the checker
    /// refuses still shows its steps (what each mask allowed and blocked) with the
    /// refusal as a NOTICE, but not its tokens: a refused statement is never returned.
    #[allow(clippy::type_complexity)]
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn explain(
        question: &str,
    ) -> TableIterator<
        'static,
        (
            name!(step, i32),
            name!(token, Option<String>),
            name!(allowed, i64),
            name!(blocked, i64),
            name!(kind, String),
        ),
    > {
        let g = super::generate("grid.explain", question, true);
        if let Some(why) = &g.refused {
            pgrx::notice!("grid.explain: {}", grid_core::message::ascii(why));
        }
        TableIterator::new(g.steps.into_iter().map(|s| {
            (
                i32::try_from(s.step).unwrap_or(i32::MAX),
                s.token,
                i64::from(s.allowed),
                i64::from(s.blocked),
                s.kind.name().to_string(),
            )
        }))
    }
}
