//! per_example {"op", "attrs", "batched"}: a primitive applied to each element of a batch. The
//! operands marked in `batched` lead with the batch axis; element `i` of the result is `op`
//! applied to element `i` of each of them and to the other operands whole. It is the batching
//! rule every primitive may fall back on: its kernel is the inner kernel, called once per
//! example, so it agrees bit for bit with a loop over examples. Its derivative rules are the
//! inner primitive's rules, batched.

use std::sync::Arc;

use rayon::prelude::*;
use serde_json::Value;

use super::{batch_into, lift};
use crate::ir::{
    operand_refs, with_lead, without_lead, AttrReader, Attrs, BatchCtx, Budget, Builder, InputKind,
    KernelError, Operands, Prim, Primitive, Registry, RuleError, RuleKind, TypeError, Var,
};
use crate::prim::Ops;
use crate::tensor::{Array, Tensor, TensorType};

#[derive(Debug, Clone)]
pub struct PerExample {
    pub inner: Prim,
    pub batched: Vec<bool>,
}

impl PerExample {
    pub fn new(inner: Prim, batched: Vec<bool>) -> PerExample {
        PerExample { inner, batched }
    }

    /// The operand types of one example, and the batch size.
    fn example_types(&self, inputs: &[TensorType]) -> Result<(Vec<TensorType>, usize), TypeError> {
        if inputs.len() != self.batched.len() {
            return Err(TypeError::Arity {
                expected: self.batched.len().to_string(),
                found: inputs.len(),
            });
        }
        let mut size = None;
        let mut types = Vec::with_capacity(inputs.len());
        for (index, (ty, &batched)) in inputs.iter().zip(&self.batched).enumerate() {
            if !batched {
                types.push(ty.clone());
                continue;
            }
            let Some(&lead) = ty.dims().first() else {
                return Err(TypeError::Operand {
                    index,
                    expected: "a batched operand (rank at least 1)".to_string(),
                    found: ty.clone(),
                });
            };
            if *size.get_or_insert(lead) != lead {
                return Err(TypeError::Operand {
                    index,
                    expected: format!("a batch of {}", size.unwrap_or(lead)),
                    found: ty.clone(),
                });
            }
            types.push(without_lead(ty));
        }
        let size = size.ok_or_else(|| TypeError::attr("batched", "marks no operand"))?;
        Ok((types, size))
    }

    /// Builds the inner rule over one example's values (`rule` receives the example operands
    /// and output) and batches it into `b`: `args` are the outer values with their batch flags.
    fn batched_rule(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        extra: &[(TensorType, Var, bool)],
        rule: impl FnOnce(&mut Builder, &[Var], Var, &[Var]) -> Result<Vec<Option<Var>>, RuleError>,
    ) -> Result<Vec<Option<(Var, bool)>>, RuleError> {
        let types: Vec<TensorType> = x.iter().map(|&v| b.ty(v).clone()).collect();
        let (example, size) = self.example_types(&types)?;
        let out = without_lead(b.ty(y));
        let mut sb = Builder::new();
        let build = |e: crate::ir::BuildError| RuleError::Type(TypeError::Invalid(e.to_string()));
        let mut xs = Vec::with_capacity(x.len());
        for (k, ty) in example.iter().enumerate() {
            xs.push(
                sb.input(&format!("x{k}"), ty.clone(), InputKind::Data)
                    .map_err(build)?,
            );
        }
        let ys = sb.input("y", out, InputKind::Data).map_err(build)?;
        let mut es = Vec::with_capacity(extra.len());
        for (k, (ty, _, _)) in extra.iter().enumerate() {
            es.push(
                sb.input(&format!("e{k}"), ty.clone(), InputKind::Data)
                    .map_err(build)?,
            );
        }
        let results = rule(&mut sb, &xs, ys, &es)?;
        let present: Vec<Var> = results.iter().flatten().copied().collect();
        if present.is_empty() {
            return Ok(vec![None; results.len()]);
        }
        let sub = sb.finish(&present).map_err(build)?;
        let mut args: Vec<(Var, bool)> = x
            .iter()
            .copied()
            .zip(self.batched.iter().copied())
            .collect();
        args.push((y, true));
        args.extend(extra.iter().map(|(_, v, batched)| (*v, *batched)));
        let prefix = b.set_name_prefix(&format!("{}.per_example", b.name(y)));
        let outs = batch_into(b, &sub, &args, size)
            .map_err(|e| RuleError::Type(TypeError::Invalid(e.to_string())));
        b.set_name_prefix(&prefix);
        let mut outs = outs?.into_iter();
        Ok(results
            .iter()
            .map(|r| r.and_then(|_| outs.next()))
            .collect())
    }

    /// The operands of example `i`: its slice of each batched operand, the others whole.
    fn example(&self, inputs: &[&Tensor], i: usize) -> Operands {
        inputs
            .iter()
            .zip(&self.batched)
            .map(|(t, &batched)| if batched { slice(t, i) } else { (*t).clone() })
            .collect()
    }
}

/// Element `i` of a batched tensor.
fn slice(t: &Tensor, i: usize) -> Tensor {
    fn part<T: Clone>(a: &Array<T>, i: usize) -> Array<T> {
        let n = a.len() / a.dims()[0];
        Array::new(
            a.dims()[1..].to_vec(),
            a.data()[i * n..(i + 1) * n].to_vec(),
        )
        .expect("a slice of a batched array has the example's length")
    }
    match t {
        Tensor::F32(a) => Tensor::F32(part(a, i)),
        Tensor::F64(a) => Tensor::F64(part(a, i)),
        Tensor::I64(a) => Tensor::I64(part(a, i)),
        Tensor::Bool(a) => Tensor::Bool(part(a, i)),
        Tensor::Stored(s) => Tensor::Stored(s.row(i)),
    }
}

/// The results of each example, one after another, under a leading batch axis.
fn stack(parts: Vec<Tensor>, ty: &TensorType) -> Result<Tensor, KernelError> {
    fn join<T: Clone>(parts: Vec<Array<T>>, ty: &TensorType) -> Result<Array<T>, KernelError> {
        let mut data = crate::tensor::alloc::with_capacity(ty.numel())?;
        for p in parts {
            data.extend_from_slice(p.data());
        }
        Array::with_elems(ty.dims().to_vec(), data)
            .map_err(|e| KernelError::Unsupported(e.to_string()))
    }
    let mixed = || KernelError::Unsupported("examples gave results of different dtypes".into());
    Ok(match ty.dtype {
        crate::tensor::DType::F32 => Tensor::F32(join(
            parts
                .into_iter()
                .map(|t| match t {
                    Tensor::F32(a) => Ok(a),
                    _ => Err(mixed()),
                })
                .collect::<Result<_, _>>()?,
            ty,
        )?),
        crate::tensor::DType::F64 => Tensor::F64(join(
            parts
                .into_iter()
                .map(|t| match t {
                    Tensor::F64(a) => Ok(a),
                    _ => Err(mixed()),
                })
                .collect::<Result<_, _>>()?,
            ty,
        )?),
        crate::tensor::DType::I64 => Tensor::I64(join(
            parts
                .into_iter()
                .map(|t| match t {
                    Tensor::I64(a) => Ok(a),
                    _ => Err(mixed()),
                })
                .collect::<Result<_, _>>()?,
            ty,
        )?),
        d if d.is_storage() => return Err(crate::prim::dispatch::storage_operand(d)),
        crate::tensor::DType::Bool => Tensor::Bool(join(
            parts
                .into_iter()
                .map(|t| match t {
                    Tensor::Bool(a) => Ok(a),
                    _ => Err(mixed()),
                })
                .collect::<Result<_, _>>()?,
            ty,
        )?),
        _ => return Err(mixed()),
    })
}

impl Primitive for PerExample {
    fn name(&self) -> &str {
        "per_example"
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_per_example))
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([
            ("op", Value::from(self.inner.name())),
            ("attrs", Value::Object(self.inner.attrs())),
            ("batched", Value::from(self.batched.clone())),
        ])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        let (types, size) = self.example_types(inputs)?;
        Ok(with_lead(&self.inner.infer(&types)?, size))
    }
    fn eval(&self, inputs: &[&Tensor]) -> Result<Tensor, KernelError> {
        let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
        let (example, size) = self
            .example_types(&types)
            .map_err(|e| KernelError::Unsupported(e.to_string()))?;
        let out = self
            .inner
            .infer(&example)
            .map_err(|e| KernelError::Unsupported(e.to_string()))?;
        let parts = (0..size)
            .into_par_iter()
            .map(|i| {
                let example = self.example(inputs, i);
                let refs = operand_refs(&example);
                self.inner.eval(&refs)
            })
            .collect::<Result<Vec<Tensor>, KernelError>>()?;
        stack(parts, &with_lead(&out, size))
    }
    fn copies_operand_values(&self) -> bool {
        self.inner.copies_operand_values()
    }
    fn f32_budget(&self, inputs: &[TensorType], output: &TensorType) -> Budget {
        match self.example_types(inputs) {
            Ok((types, _)) => self.inner.f32_budget(&types, &without_lead(output)),
            Err(_) => Budget::Measured,
        }
    }
    fn smooth(&self) -> bool {
        self.inner.smooth()
    }
    fn is_contraction(&self) -> bool {
        self.inner.is_contraction()
    }
    fn flops(&self, inputs: &[TensorType], output: &TensorType) -> u64 {
        match self.example_types(inputs) {
            Ok((types, size)) => size as u64 * self.inner.flops(&types, &without_lead(output)),
            Err(_) => output.numel() as u64,
        }
    }
    fn rule(&self) -> RuleKind {
        self.inner.rule()
    }
    fn convention_points(&self, inputs: &[&Tensor]) -> usize {
        let Some(size) = inputs
            .iter()
            .zip(&self.batched)
            .find(|(_, &b)| b)
            .and_then(|(t, _)| t.dims().first().copied())
        else {
            return 0;
        };
        (0..size)
            .map(|i| {
                let example = self.example(inputs, i);
                let refs = operand_refs(&example);
                self.inner.convention_points(&refs)
            })
            .sum()
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let extra: Vec<(TensorType, Var, bool)> = dx
            .iter()
            .zip(x)
            .enumerate()
            .filter_map(|(k, (d, &xv))| {
                d.map(|d| {
                    let ty = b.ty(xv).clone();
                    let ty = if self.batched[k] {
                        without_lead(&ty)
                    } else {
                        ty
                    };
                    (ty, d, self.batched[k])
                })
            })
            .collect();
        let inner = self.inner.clone();
        let present: Vec<bool> = dx.iter().map(Option::is_some).collect();
        let out = self.batched_rule(b, x, y, &extra, |sb, xs, ys, es| {
            let mut es = es.iter();
            let dxs: Vec<Option<Var>> = present
                .iter()
                .map(|&p| if p { es.next().copied() } else { None })
                .collect();
            Ok(vec![inner.jvp(sb, xs, ys, &dxs)?])
        })?;
        let size = b.ty(y).dims()[0];
        match out.into_iter().next().flatten() {
            None => Ok(None),
            Some((t, batched)) => Ok(Some(lift(b, t, batched, size)?)),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dy: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        let dy_ty = without_lead(b.ty(dy));
        let inner = self.inner.clone();
        let out = self.batched_rule(b, x, y, &[(dy_ty, dy, true)], |sb, xs, ys, es| {
            inner.vjp(sb, xs, ys, es[0])
        })?;
        let size = b.ty(y).dims()[0];
        let mut cts = Vec::with_capacity(x.len());
        for (k, ct) in out.into_iter().enumerate() {
            cts.push(match ct {
                None => None,
                Some((c, batched)) => {
                    let c = lift(b, c, batched, size)?;
                    // An unbatched operand was read by every example: its cotangents add.
                    Some(if self.batched[k] {
                        c
                    } else {
                        b.sum(c, Some(vec![0]))?
                    })
                }
            });
        }
        Ok(cts)
    }
    fn batch(&self, b: &mut Builder, x: &[Var], at: &BatchCtx) -> Result<Var, RuleError> {
        super::per_example(b, x, at)
    }
}

/// Registers `per_example`; its inner primitive is built from the built-in registry.
pub fn register(r: &mut Registry) {
    r.register("per_example", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let op = a.string("op")?.to_string();
        let inner_attrs = match a.get("attrs") {
            None => Attrs::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(v) => {
                return Err(TypeError::attr(
                    "attrs",
                    format!("expected an object, found {v}"),
                ))
            }
        };
        let batched = match a.require("batched")? {
            Value::Array(xs) => xs
                .iter()
                .map(|v| {
                    v.as_bool()
                        .ok_or_else(|| TypeError::attr("batched", "expected booleans"))
                })
                .collect::<Result<Vec<bool>, _>>()?,
            v => {
                return Err(TypeError::attr(
                    "batched",
                    format!("expected a list of booleans, found {v}"),
                ))
            }
        };
        a.finish()?;
        let inner = crate::prim::builtins()
            .construct(&op, &inner_attrs)
            .ok_or_else(|| TypeError::attr("op", format!("unknown primitive `{op}`")))??;
        Ok(Arc::new(PerExample::new(inner, batched)) as Prim)
    });
    r.set_example(
        "per_example",
        crate::ir::attrs_json(r#"{"op": "tanh", "attrs": {}, "batched": [true]}"#),
    );
}

/// mul applied per example of a batched x (its leading axis) to one weight of an example's
/// type: in the hull of the products of the two ranges.
fn draw_per_example(d: &mut dyn crate::ir::Draw) -> Result<crate::ir::Drawn, crate::ir::DrawError> {
    let x = d.pick();
    let x = d.ranked(x)?;
    let w = d.weight(&without_lead(&d.ty(x.var)))?;
    let prim: Prim = Arc::new(PerExample::new(
        Arc::new(crate::prim::Mul),
        vec![true, false],
    ));
    let var = d.apply(prim, &[x.var, w.var])?;
    Ok(crate::ir::Drawn {
        var,
        range: x.range.times(w.range),
    })
}
