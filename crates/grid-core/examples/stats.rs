//! Prints the size of the dialect and how long its pieces take to build.
use std::time::Instant;

fn main() -> Result<(), grid_core::GridError> {
    let t = Instant::now();
    let d = grid_core::Dialect::postgres()?;
    println!(
        "dialect: {} terminals, {} rules, {} productions, {} LR states, {} lexer states, built in {:?}",
        d.terms.names.len(),
        d.cfg.rules.len(),
        d.cfg.prods.len(),
        d.table.n_states,
        d.dfa.n_states(),
        t.elapsed()
    );
    let t = Instant::now();
    let _ = grid_core::grammar::table::LrTable::build(&d.cfg)?;
    println!("one LR table build: {:?}", t.elapsed());
    Ok(())
}
