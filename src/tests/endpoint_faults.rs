//! Endpoint faults seen through `grid.ask()`: each gives its own SQLSTATE, and the audit
//! records the failed generation with its stop reason (as the fault suite's endpoint arm
//! does on a cluster). The endpoint is a raw HTTP server on loopback, in a thread of the test's backend: it serves the
//! built-in vocabulary like the reference endpoint, and answers every step request with
//! the fault under test.

#[pgrx::pg_schema]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    use crate::tests::support::{run, select_one, worker_ready};
    use grid_endpoint::backend::builtin::builtin_vocabulary;
    use grid_endpoint::PROTOCOL;
    use pgrx::prelude::*;

    /// What the fake endpoint does with a step request.
    #[derive(Clone, Copy, Debug)]
    enum Fault {
        /// Reads it and never answers.
        Hang,
        /// HTTP 500.
        ServerError,
        /// 200 with a body that is not JSON.
        Malformed,
        /// 200 announcing more body than it sends, then closes.
        Truncated,
        /// The request-level vocabulary mismatch of the protocol (HTTP 409).
        WrongFingerprint,
        /// Closes the connection without a word.
        Disconnect,
    }

    fn vocabulary_body() -> String {
        let vocab = builtin_vocabulary().expect("builtin vocabulary");
        let mut doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&vocab.to_served_json()).expect("served json");
        doc.insert("protocol".into(), PROTOCOL.into());
        doc.insert("model".into(), "fault-injector".into());
        doc.insert("fingerprint".into(), vocab.fingerprint().into());
        doc.insert("vocab_size".into(), vocab.len().into());
        doc.insert("mask_cache_capacity".into(), 64.into());
        doc.insert("max_batch".into(), 64.into());
        serde_json::Value::Object(doc).to_string()
    }

    fn respond(stream: &mut TcpStream, status: &str, body: &str) {
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }

    /// Reads one request (head and the body its content-length announces).
    fn read_request(stream: &mut TcpStream) -> String {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        while let Ok(n) = stream.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text[..end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())
                            .flatten()
                    })
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    return text[..end].to_string();
                }
            }
        }
        String::from_utf8_lossy(&buf).to_string()
    }

    /// Starts the fake endpoint; returns its URL.
    fn spawn(fault: Fault) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let vocabulary = vocabulary_body();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let vocabulary = vocabulary.clone();
                std::thread::spawn(move || {
                    let head = read_request(&mut stream);
                    if head.starts_with("GET /v1/vocabulary") {
                        return respond(&mut stream, "200 OK", &vocabulary);
                    }
                    match fault {
                        Fault::Hang => std::thread::sleep(Duration::from_secs(120)),
                        Fault::ServerError => respond(
                            &mut stream,
                            "500 Internal Server Error",
                            r#"{"error":{"code":"internal","message":"injected failure"}}"#,
                        ),
                        Fault::Malformed => respond(&mut stream, "200 OK", "this is not json"),
                        Fault::Truncated => {
                            let _ = stream.write_all(
                                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\nconnection: close\r\n\r\n{\"results\":[",
                            );
                        }
                        Fault::WrongFingerprint => respond(
                            &mut stream,
                            "409 Conflict",
                            r#"{"error":{"code":"vocab_mismatch","message":"this endpoint serves another vocabulary","server_fingerprint":"00000000000000000000000000000000"}}"#,
                        ),
                        Fault::Disconnect => {}
                    }
                });
            }
        });
        url
    }

    /// One ask through the in-process scripted mock with time to spare: the role's
    /// language is compiled and cached (the fake endpoints serve the same built-in
    /// vocabulary), so the asks under test measure the endpoint, not a cold compile.
    fn warm_up(table: &str) {
        let script = std::env::temp_dir().join(format!("grid_t_warm_{}.json", std::process::id()));
        std::fs::write(
            &script,
            format!(r#"{{"entries":[{{"match":"warm","sql":"SELECT id FROM {table}"}}]}}"#),
        )
        .expect("script");
        run(&format!(
            "SET grid.endpoint = 'mock:scripted:{}'",
            script.display()
        ));
        run("SET grid.timeout = '120s'");
        let sql: Option<String> = select_one("SELECT grid.ask('warm up')");
        assert_eq!(sql, Some(format!("SELECT id FROM {table}")));
    }

    /// Asks under `fault`; returns the SQLSTATE, the message, the seconds it took and
    /// the stop reason the audit recorded for the question.
    fn ask_under(fault: Fault, question: &str) -> (String, String, f64, Option<String>) {
        let url = spawn(fault);
        run(&format!("SET grid.endpoint = '{url}'"));
        let started = Instant::now();
        let outcome = crate::tests::support::refusal(&format!("SELECT grid.ask('{question}')"))
            .unwrap_or_else(|| panic!("{fault:?}: the ask succeeded"));
        let seconds = started.elapsed().as_secs_f64();
        let (state, message) = outcome.split_once(": ").unwrap_or(("", ""));
        let stop: Option<String> = select_one(&format!(
            "SELECT (SELECT stop FROM grid.generations WHERE question = '{question}' ORDER BY seal_index DESC LIMIT 1)"
        ));
        (state.to_string(), message.to_string(), seconds, stop)
    }

    #[pg_test]
    fn each_endpoint_fault_has_its_own_sqlstate_and_an_audited_stop() {
        worker_ready();
        run("CREATE TABLE public.grid_t_f (id int, label text)");
        run("SET search_path = public");
        run("SET grid.max_tokens = 24");
        warm_up("grid_t_f");
        run("SET grid.timeout = '1s'");
        let tag = std::process::id();
        let mut seen = Vec::new();
        for (fault, state, words) in [
            (Fault::Hang, "58000", "(timeout)"),
            (Fault::ServerError, "38000", "HTTP 500"),
            (Fault::Malformed, "08P01", "malformed"),
            (Fault::Truncated, "08007", "truncated"),
            (Fault::WrongFingerprint, "42804", "fingerprint"),
            (Fault::Disconnect, "08006", "closed"),
        ] {
            let question = format!("fault {fault:?} {tag}");
            let (got, message, seconds, stop) = ask_under(fault, &question);
            pgrx::log!("endpoint fault {fault:?}: {got} after {seconds:.3} s: {message}");
            assert_eq!(got, state, "{fault:?}: {message}");
            assert!(message.contains(words), "{fault:?}: {message}");
            assert!(message.contains("model endpoint"), "{fault:?}: {message}");
            // The generation that met the fault is sealed with its stop reason.
            assert_eq!(stop.as_deref(), Some("error"), "{fault:?}");
            seen.push(got);
        }
        // Refused connections: no server at all. The ask fails before its generation
        // begins (no vocabulary), and is sealed all the same.
        run("SET grid.endpoint = 'http://127.0.0.1:9'");
        let question = format!("fault refused {tag}");
        let m = crate::tests::support::assert_refused(
            &format!("SELECT grid.ask('{question}')"),
            "08001",
        );
        assert!(m.contains("refused"), "{m}");
        let (stop, steps): (Option<String>, Option<i32>) = Spi::get_two(&format!(
            "SELECT stop, steps FROM grid.generations WHERE question = '{question}'"
        ))
        .expect("the refused ask is audited");
        assert_eq!((stop.as_deref(), steps), (Some("error"), Some(0)));
        let why: Option<String> = select_one(&format!(
            "SELECT a.content_json ->> 'reason' FROM grid.generations g
               JOIN grid.artifacts a ON a.kind = 'vocabulary' AND a.fingerprint = g.vocabulary_fp
              WHERE g.question = '{question}'"
        ));
        assert!(why.unwrap_or_default().contains("refused"));
        let ok: Option<bool> = select_one("SELECT ok FROM grid.verify_audit()");
        assert_eq!(ok, Some(true));
        assert_eq!(seen.len(), 6);
    }

    #[pg_test]
    fn a_cancelled_ask_does_not_hold_the_worker_on_a_hung_endpoint() {
        worker_ready();
        run("CREATE TABLE public.grid_t_g (id int)");
        run("SET search_path = public");
        warm_up("grid_t_g");
        let hung = spawn(Fault::Hang);
        run(&format!("SET grid.endpoint = '{hung}'"));
        run("SET grid.timeout = '60s'");
        // What pg_cancel_backend does, 1 s into the ask (the worker is then waiting for
        // the hung endpoint).
        let pid = std::process::id().to_string();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1000));
            std::process::Command::new("sh")
                .args(["-c", &format!("kill -INT {pid}")])
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        });
        let m = crate::tests::support::refusal("SELECT grid.ask('hung, then cancelled')")
            .unwrap_or_default();
        assert!(killer.join().unwrap_or(false), "kill -INT failed");
        assert!(m.starts_with("57014: "), "{m}");
        // The next ask, with a short budget of time, is served: the worker abandoned the
        // hung request once nobody waited for it.
        let script = std::env::temp_dir().join(format!("grid_t_g_{}.json", std::process::id()));
        std::fs::write(
            &script,
            r#"{"entries":[{"match":"ids","sql":"SELECT id FROM grid_t_g"}]}"#,
        )
        .expect("script");
        run(&format!(
            "SET grid.endpoint = 'mock:scripted:{}'",
            script.display()
        ));
        run("SET grid.timeout = '5s'");
        let sql: Option<String> = select_one("SELECT grid.ask('the ids')");
        assert_eq!(sql.as_deref(), Some("SELECT id FROM grid_t_g"));
    }
}
