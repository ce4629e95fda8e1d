use crate::common::*;
