//! Files for a test of the layout check, in a temporary directory.

/// A directory of files for a test, removed when dropped.
pub fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("creating a directory");
        std::fs::write(&path, text).expect("writing a fixture file");
    }
    dir
}
