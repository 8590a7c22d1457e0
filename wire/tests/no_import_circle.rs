//! No two modules of the crate import each other in a circle, at any level of its module
//! tree (see `efr_layout`), but the ones listed, which the crate's owner breaks: the list
//! only shrinks (an entry whose circle is gone fails the test).

#[test]
fn no_module_imports_another_that_imports_it_back() {
    efr_layout::assert_import_circles_only(
        concat!(env!("CARGO_MANIFEST_DIR"), "/src"),
        &[
            // gitenv's drops carry envfilter's `DropReason`; envfilter's drop list holds
            // gitenv's `SetDrop`
            &["envfilter", "gitenv"],
            // a call's params hold job's `Background`; a job's output is call's
            // `OutputData`/`OutputStream`
            &["call", "job"],
        ],
    );
}
