//! The mask worker and its socket (src/worker/): pings, frames it cannot read, oversized
//! requests, requests it checks again, concurrent appends to one chain, clients that
//! leave, the warm-up's endpoints, and the backend's wait (`grid.timeout`, a cancel).

#[pgrx::pg_schema]
mod tests {
    use std::time::Duration;

    use std::io::Write;
    use std::os::unix::net::UnixStream;

    use crate::tests::support::{assert_refused, install, refusal, run, select_one, worker_ready};
    use pgrx::prelude::*;

    use crate::worker::protocol::{
        encode, read_blocking, FrameReader, Request, Response, SyntheticGeneration, MAX_FRAME,
    };
    use crate::worker::SOCKET_NAME;

    /// Sends raw bytes on a connection of its own (then ends the sending side) and
    /// returns what the worker answers before it closes the connection.
    fn raw(bytes: &[u8]) -> Vec<Response> {
        let mut stream = UnixStream::connect(SOCKET_NAME).expect("connect to the worker");
        stream.write_all(bytes).expect("send");
        stream
            .shutdown(std::net::Shutdown::Write)
            .expect("shutdown");
        let mut reader = FrameReader::new();
        let mut answers = Vec::new();
        while let Ok(Some(r)) = read_blocking::<Response>(&mut stream, &mut reader) {
            answers.push(r);
        }
        answers
    }

    fn sqlstate_of(answers: &[Response]) -> Vec<String> {
        answers
            .iter()
            .map(|r| match r {
                Response::Error { sqlstate, .. } => sqlstate.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(payload);
        f
    }

    fn still_serving() {
        let pong: Option<pgrx::JsonB> = select_one("SELECT grid.worker_ping()");
        assert_eq!(pong.map(|j| j.0["type"].clone()), Some("pong".into()));
    }

    #[pg_test]
    fn bad_frames_get_a_protocol_error_and_the_worker_goes_on() {
        install();
        worker_ready();
        // Not JSON; JSON that is no request; a request with a field too many.
        for payload in [
            &b"{x}"[..],
            br#"{"type":"shutdown"}"#,
            br#"{"type":"ping","nonce":1,"delay_ms":0,"admin":true}"#,
        ] {
            let answers = raw(&frame(payload));
            assert_eq!(sqlstate_of(&answers), ["08P01"], "{payload:?}");
        }
        // A valid request after a bad one on the same connection is not read: the
        // stream cannot be trusted past a bad frame.
        let mut bytes = frame(b"[]");
        bytes.extend(
            encode(&Request::Ping {
                nonce: 1,
                delay_ms: 0,
            })
            .unwrap_or_default(),
        );
        assert_eq!(sqlstate_of(&raw(&bytes)), ["08P01"]);
        // A length over the cap is refused from the header alone.
        let answers = raw(&(MAX_FRAME as u32 + 1).to_be_bytes());
        assert_eq!(sqlstate_of(&answers), ["54000"]);
        if let [Response::Error { message, .. }] = &answers[..] {
            assert!(message.contains("exceeds the limit"), "{message}");
        }
        // Half a frame, then the client goes away.
        let whole = encode(&Request::Ping {
            nonce: 2,
            delay_ms: 0,
        })
        .unwrap_or_default();
        assert_eq!(sqlstate_of(&raw(&whole[..whole.len() / 2])), ["08P01"]);
        // A good request on a raw connection is answered.
        assert!(matches!(
            &raw(&whole)[..],
            [Response::Pong { nonce: 2, .. }]
        ));
        still_serving();
    }

    #[pg_test]
    fn concurrent_appends_keep_one_chain() {
        use crate::worker::protocol::SyntheticGeneration;

        worker_ready();
        // Several connections to the worker at once, from plain threads (they speak the
        // socket protocol, and touch nothing of PostgreSQL), as several backends would.
        let (session_user, current_user): (Option<String>, Option<String>) =
            Spi::get_two("SELECT session_user::text, current_user::text").unwrap_or((None, None));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (su, cu) = (
                    session_user.clone().unwrap_or_default(),
                    current_user.clone().unwrap_or_default(),
                );
                std::thread::spawn(move || {
                    let mut ids = Vec::new();
                    for i in 0..5u32 {
                        let request = Request::AppendSynthetic(SyntheticGeneration {
                            question: Some(format!("concurrent {t}.{i}")),
                            final_sql: None,
                            tokens: vec![t, i],
                            stop: Some("eos".into()),
                            session_user: su.clone(),
                            current_user: cu.clone(),
                            lock_timeout_ms: 10_000,
                        });
                        let mut stream = UnixStream::connect(SOCKET_NAME)
                            .map_err(|e| format!("connect: {e}"))?;
                        std::io::Write::write_all(
                            &mut stream,
                            &encode(&request).map_err(|e| e.to_string())?,
                        )
                        .map_err(|e| e.to_string())?;
                        match read_blocking::<Response>(&mut stream, &mut FrameReader::new()) {
                            Ok(Some(Response::Appended { generation, .. })) => ids.push(generation),
                            other => return Err(format!("{other:?}")),
                        }
                    }
                    Ok::<_, String>(ids)
                })
            })
            .collect();
        let mut ids = Vec::new();
        for t in threads {
            match t.join() {
                Ok(Ok(mut got)) => ids.append(&mut got),
                Ok(Err(e)) => panic!("append: {e}"),
                Err(_) => panic!("append thread panicked"),
            }
        }
        assert_eq!(ids.len(), 20);
        let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        // Twenty distinct seals, each with its steps, in a chain that verifies.
        let distinct: Option<i64> = select_one(&format!(
            "SELECT count(DISTINCT seal_index) FROM grid.generations WHERE generation IN ({list})"
        ));
        assert_eq!(distinct, Some(20));
        let steps: Option<i64> = select_one(&format!(
            "SELECT count(*) FROM grid.audit_log WHERE generation IN ({list})"
        ));
        assert_eq!(steps, Some(20 * 3));
        let (ok, reason): (Option<bool>, Option<String>) =
            Spi::get_two("SELECT ok, reason FROM grid.verify_audit()").expect("verify");
        assert_eq!(ok, Some(true), "{reason:?}");
        // One chain: every seal's predecessor is the seal before it.
        let forks: Option<i64> = select_one(
            "SELECT count(*) FROM grid.generations g
               JOIN grid.generations p ON p.seal_index = g.seal_index - 1
              WHERE g.prev_seal_hash <> p.hash",
        );
        assert_eq!(forks, Some(0));
    }

    #[pg_test]
    fn a_client_that_leaves_before_the_answer_does_not_lose_the_write() {
        install();
        worker_ready();
        let (su, cu): (Option<String>, Option<String>) =
            Spi::get_two("SELECT session_user::text, current_user::text").unwrap_or((None, None));
        let request = Request::AppendSynthetic(SyntheticGeneration {
            question: Some("asked, then gone".into()),
            final_sql: None,
            tokens: vec![9],
            stop: Some("eos".into()),
            session_user: su.unwrap_or_default(),
            current_user: cu.unwrap_or_default(),
            lock_timeout_ms: 10_000,
        });
        {
            let mut stream = UnixStream::connect(SOCKET_NAME).expect("connect");
            stream
                .write_all(&encode(&request).unwrap_or_default())
                .expect("send");
            // Dropped here, before the answer.
        }
        let mut found = None;
        for _ in 0..100 {
            found = select_one::<i64>(
                "SELECT count(*) FROM grid.generations WHERE question = 'asked, then gone'",
            );
            if found == Some(1) {
                break;
            }
            run("SELECT pg_sleep(0.1)");
        }
        assert_eq!(found, Some(1));
        still_serving();
    }

    #[pg_test]
    fn the_worker_checks_a_request_again_and_rolls_back_what_it_refuses() {
        install();
        worker_ready();
        // What the backend would refuse, sent straight to the socket.
        let request = Request::AppendSynthetic(SyntheticGeneration {
            question: Some("forged stop".into()),
            final_sql: None,
            tokens: vec![1],
            stop: Some("done".into()),
            session_user: "x".into(),
            current_user: "x".into(),
            lock_timeout_ms: 1000,
        });
        let answers = raw(&encode(&request).unwrap_or_default());
        assert_eq!(sqlstate_of(&answers), ["22023"]);
        if let [Response::Error { message, .. }] = &answers[..] {
            assert!(message.contains("unknown stop reason"), "{message}");
        }
        let written: Option<i64> =
            select_one("SELECT count(*) FROM grid.generations WHERE question = 'forged stop'");
        assert_eq!(written, Some(0));
        still_serving();
    }

    #[pg_test]
    fn an_oversized_request_is_refused_in_the_backend_with_a_limit_error() {
        install();
        worker_ready();
        let m = assert_refused(
            &format!(
                "SELECT grid.audit_append_synthetic(repeat('x', {}), NULL, ARRAY[1])",
                MAX_FRAME + 1
            ),
            "54000",
        );
        assert!(m.contains("exceeds the limit"), "{m}");
        still_serving();
    }

    #[pg_test]
    fn a_ping_is_answered_by_the_background_worker() {
        install();
        worker_ready();
        let pong: Option<pgrx::JsonB> = select_one("SELECT grid.worker_ping()");
        let pong = pong.map(|j| j.0).unwrap_or_default();
        assert_eq!(pong["type"], "pong");
        // Its process title names it (pg_stat_activity lists it only once it has
        // connected to its database).
        let pid = pong["worker_pid"].as_i64().unwrap_or(0);
        let title = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let title = String::from_utf8_lossy(&title);
        assert!(
            title.contains("grid_pg mask worker"),
            "pid {pid}: {title:?}"
        );
        let backend: Option<i32> = select_one("SELECT pg_catalog.pg_backend_pid()");
        assert_ne!(Some(pid), backend.map(i64::from));
    }

    #[pg_test]
    fn a_warm_request_hands_the_pipeline_each_named_endpoint_once() {
        install();
        worker_ready();
        let warm = Request::Warm {
            endpoints: vec![
                " mock:scripted ".into(),
                "mock:scripted".into(),
                String::new(),
                // Nothing listens there: the worker logs it and goes on.
                "http://127.0.0.1:1".into(),
            ],
        };
        match crate::worker::request("warm", &warm, Duration::from_secs(10)) {
            Response::Warming { queued } => assert_eq!(queued, 2),
            other => panic!("{other:?}"),
        }
        still_serving();
    }

    #[pg_test]
    fn the_warm_up_takes_the_servers_and_databases_endpoints_before_a_roles() {
        install();
        let server: Option<String> =
            select_one("SELECT pg_catalog.current_setting('grid.endpoint', true)");
        run("CREATE ROLE warm_one; CREATE ROLE warm_two; CREATE ROLE warm_three");
        run("ALTER ROLE warm_one SET grid.endpoint = 'http://127.0.0.1:9/aa-one-role'");
        run("ALTER ROLE warm_two SET grid.endpoint = 'http://127.0.0.1:9/zz-two-roles'");
        run("ALTER ROLE warm_three SET grid.endpoint = 'http://127.0.0.1:9/zz-two-roles'");
        run(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET grid.endpoint = %L', \
             current_database(), 'http://127.0.0.1:9/zz-database'); END $$",
        );
        let read: Option<Vec<String>> = select_one(crate::worker::warmup::ENDPOINTS);
        let mut expected: Vec<String> = server.into_iter().filter(|s| !s.is_empty()).collect();
        expected.extend(
            ["zz-database", "zz-two-roles", "aa-one-role"]
                .map(|e| format!("http://127.0.0.1:9/{e}")),
        );
        assert_eq!(read.unwrap_or_default(), expected);
        // A role may not point its own asks, or the warm-up, elsewhere: the setting is
        // the superuser's (or a role's granted SET on it).
        run("SET ROLE warm_one");
        let m = assert_refused(
            "ALTER ROLE warm_one SET grid.endpoint = 'http://127.0.0.1:9/mine'",
            "42501",
        );
        assert!(m.contains("grid.endpoint"), "{m}");
        run("RESET ROLE");
    }

    #[pg_test]
    fn grid_timeout_bounds_the_wait() {
        install();
        worker_ready();
        run("SET grid.timeout = '300ms'");
        let m = refusal("SELECT grid.worker_ping(30000)").unwrap_or_default();
        assert!(m.contains("did not answer within grid.timeout"), "{m}");
    }

    #[pg_test]
    fn a_cancel_request_stops_the_wait() {
        install();
        worker_ready();
        // What pg_cancel_backend does: SIGINT to the backend, here from a plain thread
        // while the backend waits for an answer the worker delays by 30 s (grid.timeout
        // is 30 s too: without the cancel the call would succeed).
        let pid = std::process::id().to_string();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::process::Command::new("sh")
                .args(["-c", &format!("kill -INT {pid}")])
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        });
        let m = refusal("SELECT grid.worker_ping(30000)").unwrap_or_default();
        assert!(killer.join().unwrap_or(false), "kill -INT failed");
        assert!(
            m.starts_with("57014: canceling statement due to user request"),
            "{m}"
        );
    }
}
