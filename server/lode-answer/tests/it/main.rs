//! lode-answer's integration tests, linked into one binary: each binary links LanceDB and
//! DataFusion (~450 MB in a dev build), and three of them cost CI a gigabyte of disk.

mod answers;
mod egress;
mod support;
mod tools;
