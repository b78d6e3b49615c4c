pub mod ad;
pub mod interp;
pub mod ir;
pub mod prim;
pub mod tensor;
pub mod transform;
pub mod verify;
