//! The differential test of CI: a fixed seed and budget (`Budget::ci()`), so a failure
//! reproduces. Without `../shared/data` only the built-in schema is walked (and says so).

use grid_pgref::{fixtures, run, Budget};

#[test]
fn the_language_and_postgres_parse_alike() {
    let data = fixtures::data_dir();
    if data.is_none() {
        eprintln!("SKIP the Spider part: ../shared/data/spider is absent (set GRID_DATA_DIR)");
    }
    let d = run(&Budget::ci(), 20, data.as_deref(), &mut |what| {
        eprintln!("{what}")
    });
    let summary = d.summary();
    println!("{summary}");
    for x in d.disagreements.iter().take(20) {
        println!("{}: {}: {}\n  {}", x.source, x.what, x.error, x.sql);
    }
    assert!(
        d.disagreements.is_empty(),
        "{} disagreements",
        d.disagreements.len()
    );
    let admitted: u64 = d.admitted.values().sum();
    assert!(admitted > 500, "only {admitted} statements judged");
    if data.is_some() {
        assert_eq!(summary["gold_lines"], 1034);
        // PostgreSQL 15 refuses the 4 lines of tests/spider_refused_by_postgres.tsv.
        assert_eq!(summary["gold_postgres_parses"], 1030);
        assert_eq!(summary["gold_language_refused_postgres_parsed"], 0);
    }
}
