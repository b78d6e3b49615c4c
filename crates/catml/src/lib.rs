pub mod ad;
pub mod diagram;
pub mod interp;
pub mod ir;
pub mod optim;
pub mod prim;
pub mod tensor;
pub mod train;
