//! No two modules of the crate import each other in a circle, at any level of its module
//! tree (see `efr_layout`), but the ones listed, which the launcher's restructuring breaks:
//! the list only shrinks (an entry whose circle is gone fails the test, to be deleted).

#[test]
fn no_module_imports_another_that_imports_it_back() {
    efr_layout::assert_import_circles_only(
        concat!(env!("CARGO_MANIFEST_DIR"), "/src"),
        &[
            // the backends call the child's init and the view, which reach back into the
            // run, the plan and the backends (signal tables, flat aliases)
            &[
                "backend",
                "child",
                "env",
                "plan",
                "run",
                "setup",
                "supervise",
                "view",
            ],
            &["backend::native", "backend::warm"],
            &["supervise::git_io", "supervise::ops"],
        ],
    );
}
