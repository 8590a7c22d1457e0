//! The checker on made-up crates: it finds the circles a crate has, at every level of its
//! module tree, and none where the modules form layers.

use std::path::Path;

use efr_layout::{check_dir, circles, read_crate};

/// A crate in a temporary dir: `(path under src, text)` per file.
fn made_up(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    dir
}

fn found(dir: &Path) -> Vec<String> {
    check_dir(dir).expect("read")
}

#[test]
fn two_files_importing_each_other_are_a_circle() {
    let dir = made_up(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\npub fn f() -> super::a::A { todo() }\n",
        ),
    ]);
    let c = found(dir.path());
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(
        c[0].contains("under the crate root, a, b import each other"),
        "{c:?}"
    );
    assert!(
        c[0].contains("a -> b;") && c[0].contains("b -> a;"),
        "{c:?}"
    );
}

#[test]
fn a_circle_between_children_of_two_modules_is_one_between_the_modules() {
    // config::parse uses classify::tokens, classify's own file uses config: no file imports
    // itself back, but config and classify are in a circle.
    let dir = made_up(&[
        ("lib.rs", "pub mod classify;\npub mod config;\n"),
        (
            "classify.rs",
            "pub mod tokens;\nuse crate::config::Config;\n",
        ),
        ("classify/tokens.rs", "pub fn known() {}\n"),
        ("config.rs", "pub mod parse;\npub struct Config;\n"),
        (
            "config/parse.rs",
            "use crate::{classify::{tokens::{self, known}}};\n",
        ),
    ]);
    let modules = read_crate(&dir.path().join("lib.rs")).expect("read");
    let c = circles(&modules);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].parent, "");
    assert_eq!(c[0].members, ["classify", "config"]);
    assert!(
        c[0].imports
            .contains(&("config::parse".into(), "classify::tokens".into()))
            && c[0].imports.contains(&("classify".into(), "config".into())),
        "{c:?}"
    );
}

#[test]
fn a_circle_of_three_deeper_in_the_tree_names_its_parent() {
    let dir = made_up(&[
        ("main.rs", "mod outer;\nfn main() {}\n"),
        ("outer/mod.rs", "mod x;\nmod y;\nmod z;\n"),
        ("outer/x.rs", "use super::y::Y;\n"),
        (
            "outer/y.rs",
            "pub struct Y; fn g() { self::super::z::f() }\n",
        ),
        ("outer/z.rs", "pub fn f() { $crate::outer::x::h!() }\n"),
    ]);
    let c = circles(&read_crate(&dir.path().join("main.rs")).expect("read"));
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].parent, "outer");
    assert_eq!(c[0].members, ["outer::x", "outer::y", "outer::z"]);
}

#[test]
fn layers_parents_children_tests_and_comments_are_no_circle() {
    let dir = made_up(&[
        ("lib.rs", "pub mod leaf;\npub mod mid;\npub mod top;\n"),
        (
            "leaf.rs",
            "// use crate::top;\npub const S: &str = \"crate::top::T\";\n",
        ),
        // A parent using its children, children using their parent's types.
        (
            "mid.rs",
            "pub mod inner;\nuse crate::leaf::S;\npub use inner::I;\npub struct M;\n",
        ),
        (
            "mid/inner.rs",
            "use super::M;\nuse crate::mid::M as N;\npub struct I;\n",
        ),
        (
            "top.rs",
            "use crate::{leaf, mid::{self, inner::I}};\n#[cfg(test)]\nmod tests;\n",
        ),
        // Test code may import anything.
        ("top/tests.rs", "use crate::top::*;\n"),
        (
            "bin/tool.rs",
            "mod helper;\nfn main() { crate::helper::run() }\n#[cfg(test)]\nmod tests {\n use crate::leaf;\n}\n",
        ),
        ("bin/helper.rs", "pub fn run() {}\n"),
    ]);
    assert_eq!(found(dir.path()), Vec::<String>::new());
    // Each crate root is read: the bin's helper is a module of the bin's crate.
    let bin = read_crate(&dir.path().join("bin/tool.rs")).expect("read");
    assert_eq!(
        bin.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
        ["", "helper"]
    );
}

#[test]
fn a_circle_in_a_bin_crate_is_found_with_its_root() {
    let dir = made_up(&[
        ("lib.rs", "pub mod fine;\n"),
        ("fine.rs", "\n"),
        ("bin/tool.rs", "mod p;\nmod q;\nfn main() {}\n"),
        ("bin/p.rs", "use crate::q::Q;\npub struct P;\n"),
        ("bin/q.rs", "use crate::p::P;\npub struct Q;\n"),
    ]);
    let c = found(dir.path());
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(
        c[0].contains("tool.rs: under the crate root, p, q"),
        "{c:?}"
    );
}

#[test]
fn a_missing_module_file_or_a_dir_without_root_is_an_error_not_a_pass() {
    let dir = made_up(&[("lib.rs", "mod gone;\n")]);
    let e = check_dir(dir.path()).expect_err("missing module");
    assert!(e.to_string().contains("module `gone` has no file"), "{e}");
    let empty = made_up(&[("notes.txt", "")]);
    let e = check_dir(empty.path()).expect_err("no root");
    assert!(e.to_string().contains("no crate root"), "{e}");
}

#[test]
#[should_panic(expected = "import circles")]
fn the_assertion_fails_on_a_crate_with_a_circle() {
    let dir = made_up(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::*;\n"),
        ("b.rs", "use crate::a::*;\n"),
    ]);
    efr_layout::assert_no_import_circle(dir.path());
}

fn two_circles() -> tempfile::TempDir {
    made_up(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "use crate::b::*;\n"),
        ("b.rs", "use crate::a::*;\n"),
        ("c.rs", "use crate::d::*;\n"),
        ("d.rs", "use crate::c::*;\n"),
    ])
}

#[test]
fn known_circles_pass_and_only_those() {
    let dir = two_circles();
    efr_layout::assert_import_circles_only(dir.path(), &[&["a", "b"], &["c", "d", "e"]]);
    let one_known = std::panic::catch_unwind(|| {
        efr_layout::assert_import_circles_only(dir.path(), &[&["a", "b"]]);
    });
    let msg = one_known.expect_err("c, d is not known");
    let msg = msg.downcast_ref::<String>().expect("message");
    assert!(
        msg.contains("c, d import each other") && !msg.contains("a, b"),
        "{msg}"
    );
}

#[test]
#[should_panic(expected = "known import circles that are gone (delete their entries): [\"x, y\"]")]
fn a_known_circle_that_is_gone_fails_so_the_list_shrinks() {
    let dir = two_circles();
    efr_layout::assert_import_circles_only(dir.path(), &[&["a", "b"], &["c", "d"], &["x", "y"]]);
}
