//! `grid bench` and `grid bench-r` from the command line: arguments, errors, and the JSON
//! last line. No timing is asserted.

use std::path::PathBuf;
use std::process::Command;

fn grid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_grid"))
}

/// `$GRID_DATA_DIR`, or `../shared/data` beside the repository, when it has Spider.
fn data_or_skip(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("GRID_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    if dir.join("spider/tables.json").exists() && dir.join("tokenizers/gpt2").exists() {
        Some(dir)
    } else {
        eprintln!("SKIP {test}: ../shared/data is absent (set GRID_DATA_DIR to run it)");
        None
    }
}

fn last_json(out: &std::process::Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line {last:?} is not JSON: {e}"))
}

#[test]
fn bad_arguments_are_refused_with_status_2() {
    let out = grid()
        .args(["bench", "--tokenizer", "x", "--tables", "y", "--gold", "z"])
        .args(["--engines", "grid,nosuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nosuch"));
    let out = grid()
        .args([
            "bench-r",
            "--tokenizer",
            "/nonexistent/tokenizer",
            "--n",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tokenizer"));
    let out = grid()
        .args(["bench-r", "--tokenizer", "x", "--reps", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "one repetition leaves no warm sample"
    );
}

#[test]
fn bench_ends_with_the_summary_line() {
    let Some(d) = data_or_skip("bench_ends_with_the_summary_line") else {
        return;
    };
    let out = grid()
        .arg("bench")
        .arg("--tokenizer")
        .arg(d.join("tokenizers/gpt2"))
        .arg("--tables")
        .arg(d.join("spider/tables.json"))
        .arg("--gold")
        .arg(d.join("spider/dev_gold_pg.sql"))
        .args(["--limit", "2", "--reps", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = last_json(&out);
    assert_eq!(j["vocab"], "gpt2");
    let steps = j["steps"].as_u64().unwrap();
    assert!(steps > 2);
    for e in ["grid", "llguidance"] {
        let s = &j["engines"][e];
        for k in ["p50_us", "p90_us", "p99_us", "max_us", "compile_ms"] {
            assert!(s[k].as_f64().is_some(), "{e}.{k} missing in {j}");
        }
        assert!(s["p50_us"].as_f64() <= s["p99_us"].as_f64());
        assert_eq!(s["steps"].as_u64(), Some(steps), "{e}: one warm repetition");
        assert_eq!(s["rejected"].as_u64(), Some(0), "{e} refused gold");
    }
    // The second repetition replays the same statements, so GRID's mask cache must hit.
    let hit = j["engines"]["grid"]["hit_rate"].as_f64();
    assert!(
        matches!(hit, Some(h) if h > 0.0 && h <= 1.0),
        "grid hit_rate {hit:?}"
    );
    assert!(j["engines"]["llguidance"]["hit_rate"].is_null());
}

#[test]
fn bench_r_ends_with_one_fit_per_depth() {
    let Some(d) = data_or_skip("bench_r_ends_with_one_fit_per_depth") else {
        return;
    };
    let out = grid()
        .arg("bench-r")
        .arg("--tokenizer")
        .arg(d.join("tokenizers/gpt2"))
        .args(["--n", "12", "--depths", "0,3", "--reps", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = last_json(&out);
    let depths = j["depths"].as_array().unwrap();
    assert_eq!(depths.len(), 2);
    assert_eq!(depths[1]["depth"], 3);
    for row in depths {
        assert_eq!(row["steps"], 12);
        let ci = row["slope_ci95"].as_array().unwrap();
        assert!(ci[0].as_f64() <= ci[1].as_f64());
        let r2 = row["r2_cumulative"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&r2));
    }
}
