//! Prints the cl100k_base token count of standard input — an independent check of a run's
//! `tokensUsed` (RFC 0062 §2's ±10% tolerance) from the shell:
//!
//! ```text
//! cargo run -q -p distill --example count_tokens < summary.txt
//! ```

use std::io::Read;

fn main() -> std::io::Result<()> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    println!("{}", distill::count(&text));
    Ok(())
}
