//! The probe of the efr sandbox (to come, issue 6): self-tests of every layer run from the
//! inside of a real contained call, behind `admin.sandbox_check` and `sandbox.status`.
