//! Every configuration parameter of grid_pg (`grid.*`), registered once from `_PG_init`.
//!
//! Who may change what: the endpoint, the model, the API key, the audit level, the
//! ablation, the judge and the decline's teaching are `SUSET` (a superuser sets them, in `postgresql.conf` or with `ALTER ROLE …
//! SET`), so that a caller can neither redirect the worker to a host of its choosing nor
//! switch its own auditing or its mask off; the worker's thread count and cache size come
//! from the configuration file; the timeout, the token budget and the temperature are
//! per-session knobs within bounded ranges, and for roles that are not superusers
//! within the DBA's ceilings (`grid.timeout_limit`, `grid.max_tokens_limit`), so that
//! no role holds the shared worker longer than the DBA allows.
//!
//! `grid.api_key` is a secret: it is `SUPERUSER_ONLY` (SHOW, `current_setting` and
//! `pg_settings` refuse it to roles without `pg_read_all_settings`) and `NO_SHOW_ALL` (not
//! in SHOW ALL, nor in the sample configuration file). PostgreSQL only applies these flags
//! once the library is loaded in the backend: before that a value from `postgresql.conf`
//! is an unprotected placeholder that any role can SHOW. Set the key only with `grid_pg` in
//! `shared_preload_libraries` (the worker needs it there anyway), and not with `ALTER ROLE
//! … SET` (`pg_roles.rolconfig` is readable by every role).

use std::ffi::{CStr, CString};

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};

/// What the audit store records for each generation (`grid.audit`; the pipeline's
/// [`grid_ask::AuditLevel`], as a setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PostgresGucEnum)]
pub enum AuditLevel {
    /// Every step record and the seal: the log verifies and replays.
    #[name = c"full"]
    Full,
    /// Nothing is recorded.
    #[name = c"off"]
    Off,
}

/// A lever switched off for measurement (`grid.ablation`; the pipeline's
/// [`grid_ask::Ablation`] arms, as a setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PostgresGucEnum)]
pub enum Ablation {
    /// Masks, checker and repair, as shipped.
    #[name = c"none"]
    None,
    /// No repair after a refusal.
    #[name = c"no_repair"]
    NoRepair,
    /// Repair only by asking again with the reasons, never by rewinding.
    #[name = c"prompt_repair"]
    PromptRepair,
    /// No mask (and no repair): the model alone; sealed in decode mode `unconstrained`.
    #[name = c"unconstrained"]
    Unconstrained,
}

impl Ablation {
    fn arm(self) -> &'static str {
        match self {
            Ablation::None => "none",
            Ablation::NoRepair => "no_repair",
            Ablation::PromptRepair => "prompt_repair",
            Ablation::Unconstrained => "unconstrained",
        }
    }
}

static ENDPOINT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static API_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static API_KEY_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(30_000);
static MAX_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(512);
static TEMPERATURE: GucSetting<f64> = GucSetting::<f64>::new(0.0);
static WORKER_THREADS: GucSetting<i32> = GucSetting::<i32>::new(0);
static MASK_CACHE_MB: GucSetting<i32> = GucSetting::<i32>::new(1024);
static AUDIT: GucSetting<AuditLevel> = GucSetting::<AuditLevel>::new(AuditLevel::Full);
static ABLATION: GucSetting<Ablation> = GucSetting::<Ablation>::new(Ablation::None);
static JUDGE: GucSetting<bool> = GucSetting::<bool>::new(true);
// Off until the accuracy harness has measured what teaching it does to the answers.
static DECLINE: GucSetting<bool> = GucSetting::<bool>::new(false);
static VALUE_HINTS: GucSetting<i32> = GucSetting::<i32>::new(0);
static VALUE_HINTS_ROWS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
// On by default: the accuracy harness measured it helping both Qwen2.5-Coder models
// (bench/RESULTS.md, "Anchors"); with an empty store (no curator wrote one) nothing is shown.
static EXAMPLES: GucSetting<i32> = GucSetting::<i32>::new(3);
static EXAMPLES_BYTES: GucSetting<i32> = GucSetting::<i32>::new(4096);
static TIMEOUT_LIMIT_MS: GucSetting<i32> = GucSetting::<i32>::new(600_000);
static MAX_TOKENS_CEILING: GucSetting<i32> = GucSetting::<i32>::new(2048);
static SNAPSHOT_RELATIONS: GucSetting<i32> = GucSetting::<i32>::new(5_000);
static SNAPSHOT_COLUMNS: GucSetting<i32> = GucSetting::<i32>::new(100_000);
static SNAPSHOT_KB: GucSetting<i32> = GucSetting::<i32>::new(8_192);
static DEBUG_FAULT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static DATABASE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"postgres"));

/// Largest `grid.max_tokens`: far beyond any SQL statement, small enough that a step
/// number always fits the audit log's `integer` column.
pub const MAX_TOKENS_LIMIT: i32 = 32_768;

/// Registers every `grid.*` parameter. Called once per process, from `_PG_init`.
pub fn register() {
    GucRegistry::define_string_guc(
        c"grid.endpoint",
        c"URL of the model endpoint the mask worker talks to.",
        c"A grid-endpoint/1 server (the reference endpoint) or an OpenAI-compatible server. Empty means no endpoint is configured.",
        &ENDPOINT,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"grid.model",
        c"Name of the model the endpoint must serve.",
        c"Checked against the model the endpoint names in its vocabulary reply; an ask against another model fails. Empty accepts whatever it serves.",
        &MODEL,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"grid.api_key",
        c"Secret sent to the model endpoint as a bearer token.",
        c"Readable by superusers and pg_read_all_settings only; never logged or shown in errors.",
        &API_KEY,
        GucContext::Suset,
        // NO_SHOW_ALL includes NOT_IN_SAMPLE.
        GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_string_guc(
        c"grid.api_key_file",
        c"File holding the secret sent to the model endpoint (used when grid.api_key is empty).",
        c"Read by the mask worker at each ask. Unlike grid.api_key, changing it never puts the key in the server log (PostgreSQL logs a changed parameter's value at reload).",
        &API_KEY_FILE,
        GucContext::Sighup,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_int_guc(
        c"grid.timeout",
        c"Longest time one generation may take, end to end.",
        c"The backend stops waiting and the generation is sealed as cancelled after this long.",
        &TIMEOUT_MS,
        100,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"grid.max_tokens",
        c"Token budget of one generation.",
        c"The decode loop reserves part of it to complete the statement legally before the budget runs out.",
        &MAX_TOKENS,
        1,
        MAX_TOKENS_LIMIT,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"grid.temperature",
        c"Sampling temperature the endpoint uses (0 is greedy).",
        c"",
        &TEMPERATURE,
        0.0,
        2.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.worker_threads",
        c"Threads of the mask worker's pool for cold mask computations.",
        c"0 means one per CPU. Set in postgresql.conf; the worker resizes its pool on reload.",
        &WORKER_THREADS,
        0,
        256,
        // Not Postmaster: the library may be loaded after startup (CREATE EXTENSION
        // without shared_preload_libraries), when a Postmaster parameter cannot be made.
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.mask_cache_mb",
        c"Memory the mask worker's mask cache may hold, in megabytes.",
        c"Past it the oldest cached grammars' entries are dropped (they are rebuilt when needed). Set in postgresql.conf; takes effect at the next ask after a reload.",
        &MASK_CACHE_MB,
        16,
        1 << 20,
        GucContext::Sighup,
        GucFlags::UNIT_MB,
    );
    GucRegistry::define_string_guc(
        c"grid.debug_fault",
        c"For fault-injection tests only: 'panic' makes the worker's generation engine panic on the next ask.",
        c"Superuser-only. The panic must become an ERROR for the asks it hits, and the worker must go on serving.",
        &DEBUG_FAULT,
        GucContext::Suset,
        GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_enum_guc(
        c"grid.ablation",
        c"For measurement only: none, no_repair (no repair after a refusal), prompt_repair (repair by asking again, never by rewinding) or unconstrained (no mask, no repair).",
        c"Superuser-only, so that no ordinary role can switch its mask off. An unconstrained generation is sealed in decode mode 'unconstrained'; the checker still refuses what the role may not run.",
        &ABLATION,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"grid.judge",
        c"Whether PostgreSQL judges each statement (EXPLAIN as the caller, never executed) before it is returned.",
        c"On by default. Superuser-only, for measurement: off, statements are returned unjudged and sealed with the verdict 'off'.",
        &JUDGE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"grid.decline",
        c"Whether the prompt teaches the model to decline a question it cannot answer from what the role may read (CANNOT ANSWER 'reason').",
        c"Off by default. Superuser-only: it changes what every asker's model is told. The language admits a decline either way; an ask that declines fails with SQLSTATE P0002 and the model's reason.",
        &DECLINE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.value_hints",
        c"Most distinct values a text column may have for grid.ask to show them to the model beside the column (0: no value hints).",
        c"Values are read as the asker (grants and row security apply), only from columns every writer of which the asker trusts (grid.trusted_author), and archived in the audit's prompt and snapshot artifacts, which the auditor reads: superuser-only, so that the DBA decides.",
        &VALUE_HINTS,
        0,
        100,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.examples",
        c"Most curated examples (grid.examples) grid.ask shows the model before the question (0: none).",
        c"An example is shown only when a trusted author wrote it, its SQL lies in the asker's language and PostgreSQL plans it as the asker; the closest to the question first. The examples shown are archived in the audit's prompt artifact, which the auditor reads: superuser-only, so that the DBA decides.",
        &EXAMPLES,
        0,
        20,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.examples_bytes",
        c"Most bytes of question and SQL the examples grid.ask shows may take together.",
        c"",
        &EXAMPLES_BYTES,
        0,
        65_536,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.value_hints_rows",
        c"Rows of a table grid.ask reads per column for value hints.",
        c"A table with more rows shows the values of the rows read, said to be a part.",
        &VALUE_HINTS_ROWS,
        1,
        100_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.timeout_limit",
        c"Highest grid.timeout a role that is not a superuser may ask with.",
        c"The asks of a session share the worker with every other role's: a DBA bounds how long one may hold it (per role with ALTER ROLE ... SET).",
        &TIMEOUT_LIMIT_MS,
        100,
        3_600_000,
        GucContext::Suset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"grid.max_tokens_limit",
        c"Highest grid.max_tokens a role that is not a superuser may ask with.",
        c"",
        &MAX_TOKENS_CEILING,
        1,
        MAX_TOKENS_LIMIT,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.max_snapshot_relations",
        c"Most relations an ask's catalog snapshot (what the asker may use) may hold.",
        c"A larger snapshot is refused with SQLSTATE 54000 before the worker is asked. Only objects of authors the asker trusts count.",
        &SNAPSHOT_RELATIONS,
        1,
        1_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.max_snapshot_columns",
        c"Most columns an ask's catalog snapshot may hold, over all its relations.",
        c"",
        &SNAPSHOT_COLUMNS,
        1,
        100_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"grid.max_snapshot_size",
        c"Most bytes an ask's catalog snapshot may take, encoded, as it is sent to the worker.",
        c"At most 12MB: the worker's frames hold 16MB with the rest of the ask.",
        &SNAPSHOT_KB,
        64,
        12_288,
        GucContext::Suset,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_enum_guc(
        c"grid.audit",
        c"What the audit store records: full (every step and the seal) or off.",
        c"",
        &AUDIT,
        GucContext::Suset,
        GucFlags::default(),
    );
}

/// Registers the parameters that only exist with `grid_pg` in
/// `shared_preload_libraries` (the postmaster reads them once, for the worker).
pub fn register_preloaded() {
    GucRegistry::define_string_guc(
        c"grid.database",
        c"Database the mask worker connects to: the one that holds the audit store.",
        c"A background worker connects to one database for its life, and the audit chain has one head: grid functions that write the audit store run in this database only.",
        &DATABASE,
        GucContext::Postmaster,
        GucFlags::default(),
    );
}

fn string(setting: &GucSetting<Option<CString>>) -> Option<String> {
    setting
        .get()
        .and_then(|s| CStr::to_str(&s).ok().map(str::to_owned))
        .filter(|s| !s.is_empty())
}

/// `grid.debug_fault`, or `None` when unset or empty.
pub fn debug_fault() -> Option<String> {
    string(&DEBUG_FAULT)
}

/// `grid.endpoint`, or `None` when unset or empty.
pub fn endpoint() -> Option<String> {
    string(&ENDPOINT)
}

/// `grid.model`, or `None` when unset or empty.
pub fn model() -> Option<String> {
    string(&MODEL)
}

/// `grid.api_key`, or `None` when unset or empty. Never put it in a message.
pub fn api_key() -> Option<String> {
    string(&API_KEY).or_else(|| {
        let path = string(&API_KEY_FILE)?;
        // An unreadable file is no key: the endpoint then refuses with 401, which says
        // what is wrong without this function saying anything about the file's content.
        std::fs::read_to_string(path)
            .ok()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
    })
}

/// `grid.timeout`.
pub fn timeout() -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(TIMEOUT_MS.get()).unwrap_or(0))
}

/// `grid.max_tokens`.
pub fn max_tokens() -> u32 {
    u32::try_from(MAX_TOKENS.get()).unwrap_or(1)
}

/// `grid.timeout_limit`: the highest `grid.timeout` a role that is not a superuser may
/// ask with.
pub fn timeout_limit() -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(TIMEOUT_LIMIT_MS.get()).unwrap_or(0))
}

/// `grid.max_tokens_limit`.
pub fn max_tokens_limit() -> u32 {
    u32::try_from(MAX_TOKENS_CEILING.get()).unwrap_or(1)
}

/// The bounds of an ask's catalog snapshot: `grid.max_snapshot_relations`,
/// `grid.max_snapshot_columns` and `grid.max_snapshot_size` (bytes).
pub fn snapshot_bounds() -> (usize, usize, usize) {
    let n = |v: i32| usize::try_from(v).unwrap_or(0);
    (
        n(SNAPSHOT_RELATIONS.get()),
        n(SNAPSHOT_COLUMNS.get()),
        n(SNAPSHOT_KB.get()).saturating_mul(1024),
    )
}

/// `grid.temperature`.
pub fn temperature() -> f64 {
    TEMPERATURE.get()
}

/// `grid.mask_cache_mb`, in bytes.
pub fn mask_cache_bytes() -> usize {
    usize::try_from(MASK_CACHE_MB.get()).unwrap_or(16) << 20
}

/// `grid.worker_threads` (0 = one per CPU).
pub fn worker_threads() -> usize {
    usize::try_from(WORKER_THREADS.get()).unwrap_or(0)
}

/// `grid.database`.
pub fn database() -> String {
    string(&DATABASE).unwrap_or_else(|| "postgres".to_string())
}

/// `grid.judge`.
pub fn judge() -> bool {
    JUDGE.get()
}

/// `grid.decline`.
pub fn decline() -> bool {
    DECLINE.get()
}

/// `grid.value_hints` (0: off).
pub fn value_hints() -> i32 {
    VALUE_HINTS.get()
}

/// `grid.examples` (0: off).
pub fn examples() -> i32 {
    EXAMPLES.get()
}

/// `grid.examples_bytes`.
pub fn examples_bytes() -> i32 {
    EXAMPLES_BYTES.get()
}

/// `grid.value_hints_rows`.
pub fn value_hints_rows() -> i32 {
    VALUE_HINTS_ROWS.get()
}

/// `grid.ablation`.
pub fn ablation() -> grid_ask::Ablation {
    grid_ask::Ablation::named(ABLATION.get().arm()).unwrap_or_default()
}

/// `grid.audit`.
pub fn audit() -> grid_ask::AuditLevel {
    match AUDIT.get() {
        AuditLevel::Full => grid_ask::AuditLevel::Full,
        AuditLevel::Off => grid_ask::AuditLevel::Off,
    }
}
