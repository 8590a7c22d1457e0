//! The egress proxy of the efr sandbox (to come, issue 5): one DNS + TLS proxy per contained
//! call that checks every connection against the call's host grants and refuses with a
//! reason, and the driver of xdg-dbus-proxy for `bus_filter` grants.
