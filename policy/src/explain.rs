//! `sandbox.explain`: what a contained call gets at a path (issue 2).
