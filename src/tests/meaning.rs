//! One meaning for every statement, checked against PostgreSQL itself (docs/security.md):
//! PostgreSQL's own lexer (`core_yylex`, the scanner of the server these tests run in)
//! reads every statement the dialect accepts as the dialect reads it, under every value
//! of the settings a role can change that its lexer reads (`standard_conforming_strings`,
//! `backslash_quote`, `escape_string_warning`); and through `grid.run`, statements built
//! to exploit a difference run nothing hidden.

#[pgrx::pg_schema]
mod tests {
    use std::ffi::{CStr, CString};

    use crate::tests::support::{run, select_one, select_texts, worker_ready};
    use grid_core::catalog::CatalogSnapshot;
    use grid_core::{Dialect, Language, Policy, Session};
    use pgrx::prelude::*;

    /// The settings of PostgreSQL's lexer a role may change, every combination that
    /// could matter: the first is the default.
    const SETTINGS: &[(&str, &str, &str)] = &[
        ("on", "safe_encoding", "on"),
        ("off", "safe_encoding", "on"),
        ("off", "on", "off"),
        ("off", "off", "on"),
        ("on", "off", "off"),
        ("on", "on", "on"),
    ];

    /// How a token is compared: its class, and for strings and names their value.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Class {
        /// An identifier or a keyword, with its (folded) text.
        Word(String),
        /// A string constant, with its value.
        Str(String),
        Integer,
        Float,
        /// Anything else (operators, punctuation).
        Other,
    }

    /// One token: its start offset and class.
    type Token = (usize, Class);

    /// The token codes of PostgreSQL's grammar for the classes above, learnt from the
    /// lexer itself (gram.h is not bound by pgrx).
    struct Codes {
        ident: i32,
        sconst: i32,
        iconst: i32,
        fconst: i32,
        param: i32,
        /// Codes that are not keywords: single characters and the operator tokens.
        others: Vec<i32>,
    }

    /// The raw tokens of `sql` by PostgreSQL's lexer under the session's current
    /// settings, `(start, code, string value)`, or the lexer's error. The string member
    /// is read for every code but `int_codes` (ICONST and PARAM carry an int there);
    /// with `None`, for no code.
    fn raw_tokens(
        sql: &str,
        int_codes: Option<&[i32]>,
    ) -> Result<Vec<(usize, i32, Option<String>)>, String> {
        let text = CString::new(sql).map_err(|e| e.to_string())?;
        PgTryBuilder::new(|| unsafe {
            let mut extra = pg_sys::core_yy_extra_type::default();
            let scanner = pg_sys::scanner_init(
                text.as_ptr(),
                &mut extra,
                &raw const pg_sys::ScanKeywords,
                (&raw const pg_sys::ScanKeywordTokens).cast(),
            );
            let mut out = Vec::new();
            loop {
                // Zeroed: a token that sets no member leaves a null string pointer.
                let mut value = pg_sys::core_YYSTYPE::default();
                let mut at: std::ffi::c_int = 0;
                let code = pg_sys::core_yylex(&mut value, &mut at, scanner);
                if code == 0 {
                    break;
                }
                let string = match int_codes {
                    Some(ints) if !ints.contains(&code) && !value.str_.is_null() => {
                        Some(CStr::from_ptr(value.str_).to_string_lossy().into_owned())
                    }
                    _ => None,
                };
                out.push((usize::try_from(at).unwrap_or(0), code, string));
            }
            pg_sys::scanner_finish(scanner);
            Ok(out)
        })
        .catch_others(|e| match e {
            pg_sys::panic::CaughtError::PostgresError(r) => Err(r.message().to_string()),
            other => Err(format!("{other:?}")),
        })
        .execute()
    }

    /// Learns the codes from a statement of known tokens.
    fn codes() -> Codes {
        let probe = raw_tokens(
            "x 'a' 1 1.5 $1 || , :: <= >= <> != ( ) . ; [ ] * + - / % ^ = < > .. := =>",
            None,
        )
        .expect("the probe lexes");
        let code = |i: usize| probe[i].1;
        Codes {
            ident: code(0),
            sconst: code(1),
            iconst: code(2),
            fconst: code(3),
            param: code(4),
            others: probe[5..].iter().map(|t| t.1).collect(),
        }
    }

    /// PostgreSQL's tokens of `sql` under the given settings.
    fn pg_tokens(
        codes: &Codes,
        sql: &str,
        setting: (&str, &str, &str),
    ) -> Result<Vec<Token>, String> {
        let (scs, bq, esw) = setting;
        run(&format!("SET LOCAL standard_conforming_strings = {scs}"));
        run(&format!("SET LOCAL backslash_quote = {bq}"));
        run(&format!("SET LOCAL escape_string_warning = {esw}"));
        let raw = raw_tokens(sql, Some(&[codes.iconst, codes.param]));
        run("RESET standard_conforming_strings");
        run("RESET backslash_quote");
        run("RESET escape_string_warning");
        Ok(raw?
            .into_iter()
            .map(|(at, code, v)| {
                let class = if code == codes.sconst {
                    Class::Str(v.unwrap_or_default())
                } else if code == codes.iconst {
                    Class::Integer
                } else if code == codes.fconst {
                    Class::Float
                } else if code == codes.ident
                    || (code > 255 && code != codes.param && !codes.others.contains(&code))
                {
                    Class::Word(v.unwrap_or_default().to_lowercase())
                } else {
                    Class::Other
                };
                (at, class)
            })
            .collect())
    }

    /// The value of a string lexeme of the dialect, as PostgreSQL must read it (`E''`
    /// escapes as PostgreSQL documents them; `None` for a value that is not text).
    fn string_value(lexeme: &str) -> Option<String> {
        if let Some(body) = lexeme.strip_prefix('\'').and_then(|b| b.strip_suffix('\'')) {
            return Some(body.replace("''", "'"));
        }
        let body = lexeme.get(2..lexeme.len().checked_sub(1)?)?;
        let mut bytes = Vec::new();
        let mut chars = body.chars().peekable();
        fn push(bytes: &mut Vec<u8>, c: char) {
            bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
        while let Some(c) = chars.next() {
            match (c, chars.peek().copied()) {
                ('\'', Some('\'')) => {
                    chars.next();
                    push(&mut bytes, '\'');
                }
                ('\\', Some(e)) => {
                    chars.next();
                    let mut digits = |radix: u32, most: usize| -> String {
                        std::iter::from_fn(|| chars.next_if(|d| d.is_digit(radix)))
                            .take(most)
                            .collect()
                    };
                    match e {
                        'b' => bytes.push(8),
                        'f' => bytes.push(12),
                        'n' => bytes.push(b'\n'),
                        'r' => bytes.push(b'\r'),
                        't' => bytes.push(b'\t'),
                        '0'..='7' => {
                            let more = digits(8, 2);
                            bytes.push(u8::from_str_radix(&format!("{e}{more}"), 8).ok()?);
                        }
                        'x' => {
                            let hex = digits(16, 2);
                            if hex.is_empty() {
                                push(&mut bytes, 'x');
                            } else {
                                bytes.push(u8::from_str_radix(&hex, 16).ok()?);
                            }
                        }
                        'u' | 'U' => {
                            let n = if e == 'u' { 4 } else { 8 };
                            let hex = digits(16, n);
                            let c = char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?;
                            push(&mut bytes, c);
                        }
                        other => push(&mut bytes, other),
                    }
                }
                (c, _) => push(&mut bytes, c),
            }
        }
        String::from_utf8(bytes).ok()
    }

    /// The dialect's tokens of `sql` in `lang`, as PostgreSQL's classes (a `schema.table`
    /// lexeme is PostgreSQL's three tokens), or `None` when the dialect refuses `sql`.
    fn dialect_tokens(lang: &Language, sql: &str) -> Option<Vec<Token>> {
        let mut s = Session::new(lang);
        let lexemes = s.lexemes(sql.as_bytes()).ok()?;
        let terms = lang.terms();
        let mut out = Vec::new();
        for l in lexemes {
            let text = &sql[l.start..l.end];
            let name = terms
                .names_of(&l.terms)
                .first()
                .cloned()
                .unwrap_or_default();
            let word = |w: &str| {
                Class::Word(
                    match w.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
                        Some(q) => q.replace("\"\"", "\""),
                        None => w.to_lowercase(),
                    },
                )
            };
            match name {
                "STRING" | "ESTRING" | "DECLINE_REASON" => {
                    out.push((l.start, Class::Str(string_value(text)?)))
                }
                "INTEGER" | "ICONST" | "FLOAT_PREC" => out.push((l.start, Class::Integer)),
                "DECIMAL" => out.push((l.start, Class::Float)),
                _ if text
                    .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '"') =>
                {
                    // `schema.table`: split at the dot outside quotes.
                    let mut quoted = false;
                    let dot = text.char_indices().find_map(|(i, c)| {
                        if c == '"' {
                            quoted = !quoted;
                        }
                        (c == '.' && !quoted).then_some(i)
                    });
                    match dot {
                        Some(d) => {
                            out.push((l.start, word(&text[..d])));
                            out.push((l.start + d, Class::Other));
                            out.push((l.start + d + 1, word(&text[d + 1..])));
                        }
                        None => out.push((l.start, word(text))),
                    }
                }
                _ => out.push((l.start, Class::Other)),
            }
        }
        Some(out)
    }

    /// The extension's language for the current role, as the worker builds it.
    fn role_language() -> Language {
        let snapshot: CatalogSnapshot = serde_json::from_value(
            select_one::<pgrx::JsonB>("SELECT grid.catalog_snapshot()")
                .map(|j| j.0)
                .expect("a snapshot"),
        )
        .expect("the snapshot reads");
        let dialect = Dialect::generated().expect("the dialect");
        snapshot
            .language(dialect, &Policy::default())
            .expect("the language builds")
    }

    /// The corpus of tests/one_meaning.json.
    fn corpus() -> Vec<String> {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/one_meaning.json")).expect("corpus");
        doc["statements"]
            .as_array()
            .expect("statements")
            .iter()
            .filter_map(|c| c["sql"].as_str().map(String::from))
            .collect()
    }

    /// Compares `sql` across the settings and with the dialect. Returns whether the
    /// dialect accepts it; panics on any disagreement.
    fn agrees(codes: &Codes, lang: &Language, sql: &str) -> bool {
        let Some(dialect) = dialect_tokens(lang, sql) else {
            return false;
        };
        for &setting in SETTINGS {
            let pg = pg_tokens(codes, sql, setting)
                .unwrap_or_else(|e| panic!("{sql:?} under {setting:?}: PostgreSQL's lexer: {e}"));
            assert_eq!(pg, dialect, "{sql:?} under {setting:?}");
        }
        true
    }

    fn fixture() {
        worker_ready();
        for sql in [
            "CREATE TABLE public.employees (id int PRIMARY KEY, name text, dept text)",
            "CREATE TABLE public.salaries (employee_id int, salary numeric)",
            "INSERT INTO public.employees VALUES (1, 'Ada', 'r'), (2, 'Grace', 'r')",
            "CREATE TABLE public.grid_t_hits (at timestamptz DEFAULT now())",
            "CREATE FUNCTION public.grid_t_trap() RETURNS boolean LANGUAGE sql SECURITY DEFINER
                 AS $$ INSERT INTO public.grid_t_hits DEFAULT VALUES RETURNING true $$",
            "CREATE ROLE grid_t_reader NOLOGIN IN ROLE grid_user",
            "GRANT SELECT ON public.employees, public.salaries TO grid_t_reader",
            "GRANT EXECUTE ON FUNCTION public.grid_t_trap() TO grid_t_reader",
            "SET search_path = public",
        ] {
            run(sql);
        }
    }

    #[pg_test]
    fn the_corpus_reads_the_same_to_postgres_under_every_setting() {
        fixture();
        let codes = codes();
        run("SET ROLE grid_t_reader");
        let lang = role_language();
        run("RESET ROLE");
        let mut accepted = 0;
        let mut differs = 0;
        for sql in corpus() {
            accepted += usize::from(agrees(&codes, &lang, &sql));
            // The corpus exploits something: PostgreSQL itself reads it two ways (or
            // refuses it under one setting) for many of its statements.
            let base = pg_tokens(&codes, &sql, SETTINGS[0]);
            differs += usize::from(
                SETTINGS[1..]
                    .iter()
                    .any(|&s| pg_tokens(&codes, &sql, s) != base),
            );
        }
        assert!(accepted >= 8, "{accepted} statements accepted");
        assert!(differs >= 6, "only {differs} statements exploit a setting");
    }

    /// What the mocks write, through grid.ask, reads the same under every setting.
    #[pg_test]
    fn the_mocks_outputs_read_the_same_to_postgres_under_every_setting() {
        fixture();
        let codes = codes();
        let tag = format!("meaning{}", std::process::id());
        run("SET grid.endpoint = 'mock:adversarial'");
        run("SET grid.max_tokens = 64");
        run("SET grid.timeout = '120s'");
        run(
            "CREATE FUNCTION pg_temp.grid_t_asks(tag text, n int) RETURNS SETOF text
             LANGUAGE plpgsql AS $f$
             BEGIN
                 FOR i IN 1..n LOOP
                     BEGIN
                         RETURN NEXT grid.ask(tag || ' ' || i || ': a string with a \\ backslash, '
                                              || 'a quote '' and -- a comment');
                     EXCEPTION WHEN others THEN NULL;
                     END;
                 END LOOP;
             END
             $f$",
        );
        run("SET ROLE grid_t_reader");
        let lang = role_language();
        let _: Option<i64> = select_one(&format!(
            "SELECT count(*) FROM pg_temp.grid_t_asks('{tag}', 60)"
        ));
        run("RESET ROLE");
        // Every statement written, returned or refused by the checker.
        let written = select_texts(&format!(
            "SELECT final_sql FROM grid.generations
              WHERE question LIKE '{tag} %' AND final_sql IS NOT NULL"
        ));
        assert!(written.len() >= 60, "{} statements", written.len());
        for sql in &written {
            assert!(
                agrees(&codes, &lang, sql),
                "the dialect refuses its own output {sql:?}"
            );
        }
        let strings = written.iter().filter(|s| s.contains('\'')).count();
        pgrx::log!(
            "{} adversarial statements, {strings} with a string, read alike",
            written.len()
        );
    }

    /// The attack, and every corpus statement, asked of the scripted mock and run
    /// by grid.run with standard_conforming_strings off: what runs is what the dialect
    /// read, so the trap function never runs.
    #[pg_test]
    fn grid_run_under_standard_conforming_strings_off_runs_nothing_hidden() {
        fixture();
        let codes = codes();
        let statements = corpus();
        let entries: Vec<serde_json::Value> = statements
            .iter()
            .enumerate()
            .map(
                |(i, sql)| serde_json::json!({"match": format!("exploit number {i}."), "sql": sql}),
            )
            .collect();
        let script =
            std::env::temp_dir().join(format!("grid_t_meaning_{}.json", std::process::id()));
        std::fs::write(
            &script,
            serde_json::json!({ "entries": entries }).to_string(),
        )
        .expect("write the script");
        run(&format!(
            "SET grid.endpoint = 'mock:scripted:{}'",
            script.display()
        ));
        run("SET grid.max_tokens = 200");
        run("SET grid.timeout = '120s'");
        run("CREATE FUNCTION pg_temp.grid_t_try_ask(q text) RETURNS text
             LANGUAGE plpgsql AS $f$
             BEGIN
                 RETURN 'ok:' || grid.ask(q);
             EXCEPTION WHEN others THEN
                 RETURN SQLSTATE || ': ' || SQLERRM;
             END
             $f$");
        run("SET standard_conforming_strings = off");
        run("SET backslash_quote = on");
        run("SET ROLE grid_t_reader");
        let lang = role_language();
        let mut ran = 0;
        for i in 0..statements.len() {
            let q = format!("exploit number {i}.");
            let answer: Option<String> =
                select_one(&format!("SELECT pg_temp.grid_t_try_ask($q${q}$q$)"));
            let Some(text) = answer.as_deref().and_then(|a| a.strip_prefix("ok:")) else {
                continue;
            };
            run("RESET standard_conforming_strings");
            assert!(
                agrees(&codes, &lang, text),
                "{text:?} is not in the dialect"
            );
            run("SET standard_conforming_strings = off");
            let rows = crate::tests::support::refusal(&format!(
                "SELECT count(*) FROM grid.run($q${q}$q$)"
            ));
            ran += usize::from(rows.is_none());
        }
        run("RESET ROLE");
        run("RESET standard_conforming_strings");
        run("RESET backslash_quote");
        let hits: Option<i64> = select_one("SELECT count(*) FROM public.grid_t_hits");
        assert_eq!(hits, Some(0), "hidden code ran");
        assert!(ran >= 8, "only {ran} statements ran");
        // The positive control: the trap is reachable, so a hidden call would be counted.
        let _: Option<bool> = select_one("SELECT public.grid_t_trap()");
        let hits: Option<i64> = select_one("SELECT count(*) FROM public.grid_t_hits");
        assert_eq!(hits, Some(1));
    }
}
