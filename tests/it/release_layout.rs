//! The image's release build lays the functions of `build/hot-functions.txt` out first
//! (`scripts/link-hot-first.sh`, the linker `scripts/build-release.sh` gives cargo): checked on
//! a small program built the same way (symbol-mangling v0, the script as the linker), whose
//! list names, by their demangled names, the two of its four functions it lays out last
//! without the list.

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const PROGRAM: &str = r#"
#[inline(never)] fn alpha(x: u64) -> u64 { x.wrapping_mul(3) ^ 7 }
#[inline(never)] fn beta(x: u64) -> u64 { x.rotate_left(5) + 11 }
#[inline(never)] fn gamma<T: std::fmt::Debug>(t: T) -> String { format!("{t:?}") }
fn main() {
    let a = std::env::args().count() as u64;
    println!("{} {} {} {}", alpha(a), beta(a), gamma(a), gamma("x"));
}
"#;

/// The program's functions by address, as demangled names, after building it with `hot` as
/// the list (`None`: the script finds no list and links as `cc` would).
fn layout(dir: &Path, hot: Option<&str>) -> Vec<String> {
    let source = dir.join("layout.rs");
    std::fs::write(&source, PROGRAM).unwrap();
    let list = dir.join("hot-functions.txt");
    std::fs::write(&list, hot.unwrap_or("")).unwrap();
    let binary = dir.join("layout");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let built = Command::new(rustc)
        .args(["-O", "-C", "symbol-mangling-version=v0", "-C"])
        .arg(format!("linker={ROOT}/scripts/link-hot-first.sh"))
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .env("HOT_FUNCTIONS", &list)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let symbols = Command::new("nm")
        .args(["--demangle", "--numeric-sort", "--defined-only"])
        .arg(&binary)
        .output()
        .unwrap();
    String::from_utf8(symbols.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.splitn(3, ' ').nth(2))
        .filter(|name| name.starts_with("layout::") && !name.starts_with("layout::main"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_listed_functions_come_first() {
    let dir = tempfile::tempdir().unwrap();
    let plain = layout(dir.path(), None);
    assert_eq!(plain.len(), 4, "{plain:?}");
    let last_two = format!("{}\n{}\n", plain[2], plain[3]);
    let ordered = layout(dir.path(), Some(&last_two));
    let mut first = ordered[..2].to_vec();
    first.sort();
    let mut listed = plain[2..].to_vec();
    listed.sort();
    assert_eq!(
        first, listed,
        "listed first: {ordered:?} (without the list: {plain:?})"
    );
}
