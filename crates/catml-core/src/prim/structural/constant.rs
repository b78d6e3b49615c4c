//! constant {"value": TENSOR}: a fixed tensor; no operands, zero derivative.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::ir::{Draw, DrawError, Drawing, Drawn, ResultStorage};
use crate::prim::dispatch::arity;
use crate::tensor::{rational_from_f64, Array, RArray, Shape, Tensor, TensorType};

#[derive(Debug, Clone)]
pub struct Constant {
    pub value: Tensor,
}

impl Constant {
    pub fn new(value: Tensor) -> Constant {
        Constant { value }
    }
}

impl Primitive for Constant {
    fn name(&self) -> &str {
        "constant"
    }
    fn drawing(&self) -> Option<Drawing> {
        Some(Drawing::new(1, draw_constant))
    }
    fn fragment(&self) -> crate::ir::Fragment {
        crate::ir::Fragment::Core
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([(
            "value",
            serde_json::to_value(&self.value).expect("serialisable"),
        )])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 0)?;
        Ok(self.value.ty())
    }
    fn moves_storage(&self) -> bool {
        true
    }
    fn eval(&self, _x: &[&Tensor]) -> Result<Tensor, KernelError> {
        Ok(self.value.clone())
    }
    fn result_storage(&self) -> ResultStorage {
        ResultStorage::Program
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, _x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let values = self.value.to_f64_vec();
        let data = values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                rational_from_f64(v).ok_or_else(|| {
                    KernelError::Domain(format!(
                        "constant {v} at element {i} is not finite, so not rational"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>();
        Some(data.and_then(|data| {
            Array::new(Shape::new(self.value.dims().to_vec()), data)
                .map_err(|e| KernelError::Unsupported(e.to_string()))
        }))
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn jvp(
        &self,
        _b: &mut Builder,
        _x: &[Var],
        _y: Var,
        _dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        Ok(None)
    }
    fn vjp(
        &self,
        _b: &mut Builder,
        _x: &[Var],
        _y: Var,
        _u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![])
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("constant", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let v = a.get("value").ok_or_else(|| {
            TypeError::attr("value", "missing, expected a tensor {\"shape\", \"data\"}")
        })?;
        let value: Tensor = serde_json::from_value(v.clone())
            .map_err(|e| TypeError::attr("value", e.to_string()))?;
        a.finish()?;
        Ok(Arc::new(Constant::new(value)) as Prim)
    });
    r.set_example(
        "constant",
        crate::ir::attrs_json(r#"{"value": {"dtype": "f64", "shape": [], "data": [0.0]}}"#),
    );
}

fn draw_constant(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let dtype = d.some_dtype();
    let ty = TensorType::new(dtype, d.shape());
    d.constant_of(&ty)
}
