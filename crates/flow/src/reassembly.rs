//! TCP stream reassembly, one direction at a time (work in progress).
