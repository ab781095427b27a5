//! Helpers shared by the integration tests.

#[cfg(feature = "citus-tests")]
pub mod citus;
pub mod fixture;
pub mod pg;
pub mod property;

/// The names of the files in `dir`, sorted: what a command left behind.
pub fn files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
