//! Structure without arithmetic: broadcasts, layout, gathers, concatenation, constants, conversion, one-hot and row takes.

pub(crate) mod broadcast;
pub(crate) mod concat;
pub(crate) mod constant;
pub(crate) mod convert;
pub(crate) mod gather;
pub(crate) mod layout;
pub(crate) mod one_hot;
pub(crate) mod stop_gradient;
pub(crate) mod take;
