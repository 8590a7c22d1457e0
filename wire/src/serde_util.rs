//! Small predicates for `skip_serializing_if`: optional members are absent when empty,
//! false or zero, as the protocol page says.

pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

pub(crate) fn is_zero(v: &u32) -> bool {
    *v == 0
}

pub(crate) fn is_one(v: &u32) -> bool {
    *v == 1
}

pub(crate) fn one() -> u32 {
    1
}
