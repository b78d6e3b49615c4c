//! scan {"length", "carries", "xs", "consts", "reverse", "stack_carries"} with a body: a loop
//! whose step is a program (docs/scan.md).
//!
//! Operands (init carries.., xs.., consts..); each x leads with the trip count `length`. The
//! body maps (carries.., x_t.., consts..) to (carries'.., y_t..). The node's value is its results
//! packed one after another into one rank-1 tensor (a node has one value; `unpack` reads each
//! result): every carry, stacked over the steps (`stack_carries`, the default: the reverse pass
//! reads them as its residuals) or only the final one, then every y stacked over the steps.
//! Step t reads row t of each x (`x[t]`) and writes its results at row t; `reverse` runs t
//! from length-1 down to 0.

use std::sync::Arc;

use crate::ir::{
    attrs_of, AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Program, Registry,
    RuleError, TypeError, Var,
};
use crate::tensor::{Array, DType, Shape, Tensor, TensorType};

/// A loop over the leading axis of its xs whose step is the `body` program.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub body: Arc<Program>,
    /// The trip count T (at least 1).
    pub length: usize,
    pub carries: usize,
    pub xs: usize,
    pub consts: usize,
    pub reverse: bool,
    /// Whether the value holds every carry (T, ...) or only the final one.
    pub stack_carries: bool,
}

/// Which result a piece of a scan's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// Carry `k`: every step's (stacked) or the final one.
    Carry(usize),
    /// Output `k` of the body after the carries, stacked over the steps.
    Y(usize),
}

impl Scan {
    /// A scan of `body` (checked against the counts; operand types are checked when applied).
    pub fn new(
        body: Program,
        length: usize,
        carries: usize,
        xs: usize,
        consts: usize,
    ) -> Result<Scan, TypeError> {
        let scan = Scan {
            body: Arc::new(body),
            length,
            carries,
            xs,
            consts,
            reverse: false,
            stack_carries: true,
        };
        scan.check_body()?;
        Ok(scan)
    }

    pub fn reversed(mut self, reverse: bool) -> Scan {
        self.reverse = reverse;
        self
    }

    pub fn stacking_carries(mut self, stack: bool) -> Scan {
        self.stack_carries = stack;
        self
    }

    /// How many y results the body gives (its outputs after the carries).
    pub fn n_ys(&self) -> usize {
        self.body.outputs().len() - self.carries
    }

    /// The dtype every value of the scan has.
    pub fn dtype(&self) -> DType {
        self.body.inputs()[0].ty.dtype
    }

    /// The body's own shape rules: counts, one float dtype, carries in = carries out.
    fn check_body(&self) -> Result<(), TypeError> {
        let body = &self.body;
        if self.length == 0 {
            return Err(TypeError::attr("length", "a scan runs at least one step"));
        }
        let n_in = self.carries + self.xs + self.consts;
        if body.n_inputs() != n_in {
            return Err(TypeError::Invalid(format!(
                "body: takes {} inputs, expected {n_in} ({} carries, {} xs, {} consts)",
                body.n_inputs(),
                self.carries,
                self.xs,
                self.consts
            )));
        }
        if n_in == 0 {
            return Err(TypeError::Invalid("body: takes no inputs".into()));
        }
        if body.outputs().len() < self.carries
            || body.outputs().len() == self.carries && self.carries == 0
        {
            return Err(TypeError::Invalid(format!(
                "body: gives {} outputs, expected the {} carries and then the ys",
                body.outputs().len(),
                self.carries
            )));
        }
        let dtype = body.inputs()[0].ty.dtype;
        if !dtype.is_float() {
            return Err(TypeError::Invalid(format!(
                "body: input 0 `{}` is {}, expected f32 or f64",
                body.inputs()[0].name,
                body.inputs()[0].ty
            )));
        }
        for (k, i) in body.inputs().iter().enumerate() {
            if i.ty.dtype != dtype {
                return Err(TypeError::Invalid(format!(
                    "body: input {k} `{}` is {}, expected dtype {dtype} (a scan's values share one float dtype)",
                    i.name, i.ty
                )));
            }
        }
        for (k, &o) in body.outputs().iter().enumerate() {
            let ty = body.ty(o);
            if ty.dtype != dtype {
                return Err(TypeError::Invalid(format!(
                    "body: output {k} `{}` is {ty}, expected dtype {dtype}",
                    body.name(o)
                )));
            }
            if k < self.carries && *ty != body.inputs()[k].ty {
                return Err(TypeError::Invalid(format!(
                    "body: carry {k} enters as {} (input `{}`) but leaves as {ty} (output `{}`)",
                    body.inputs()[k].ty,
                    body.inputs()[k].name,
                    body.name(o)
                )));
            }
        }
        Ok(())
    }

    /// The pieces of the node's value in order, each with its type.
    pub fn pieces(&self) -> Vec<(Piece, TensorType)> {
        let body = &self.body;
        let mut out = Vec::new();
        for k in 0..self.carries {
            let ty = &body.inputs()[k].ty;
            let ty = if self.stack_carries {
                stacked(ty, self.length)
            } else {
                ty.clone()
            };
            out.push((Piece::Carry(k), ty));
        }
        for k in 0..self.n_ys() {
            let o = body.outputs()[self.carries + k];
            out.push((Piece::Y(k), stacked(body.ty(o), self.length)));
        }
        out
    }

    /// Each piece's offset in the packed value, with its type.
    pub fn layout(&self) -> Vec<(Piece, usize, TensorType)> {
        let mut offset = 0;
        self.pieces()
            .into_iter()
            .map(|(p, ty)| {
                let at = offset;
                offset += ty.numel();
                (p, at, ty)
            })
            .collect()
    }

    /// The element count of the packed value (`None` when it overflows).
    fn packed_len(&self) -> Option<usize> {
        self.pieces().iter().try_fold(0usize, |acc, (_, ty)| {
            acc.checked_add(ty.shape.checked_numel()?)
        })
    }

    /// Runs the body once: its outputs from its inputs, node by node.
    fn step(&self, t: usize, args: Vec<Tensor>) -> Result<Vec<Tensor>, KernelError> {
        let body = &*self.body;
        let last = body.last_uses();
        let mut values: Vec<Option<Tensor>> = args.into_iter().map(Some).collect();
        values.resize(body.n_vars(), None);
        let is_output = |v: usize| body.outputs().iter().any(|o| o.index() == v);
        for (i, node) in body.nodes().iter().enumerate() {
            let result = {
                let refs: Vec<&Tensor> = node
                    .operands
                    .iter()
                    .map(|o| {
                        values[o.index()]
                            .as_ref()
                            .expect("operands are defined first")
                    })
                    .collect();
                node.prim.eval(&refs)
            };
            let value = result.map_err(|e| at_step(t, i, node, e))?;
            values[body.node_var(i).index()] = Some(value);
            for o in &node.operands {
                if last[o.index()] == Some(i) && !is_output(o.index()) {
                    values[o.index()] = None;
                }
            }
        }
        Ok(body
            .outputs()
            .iter()
            .map(|o| values[o.index()].clone().expect("outputs are defined"))
            .collect())
    }
}

/// `ty` under a leading axis of `length`.
pub(crate) fn stacked(ty: &TensorType, length: usize) -> TensorType {
    let mut dims = vec![length];
    dims.extend_from_slice(ty.dims());
    TensorType::new(ty.dtype, dims)
}

/// A body node's error, told with its step and place.
fn at_step(t: usize, i: usize, node: &crate::ir::Node, e: KernelError) -> KernelError {
    let place = format!(
        "step {t}, body node {i} `{}` ({})",
        node.name,
        node.prim.name()
    );
    match e {
        KernelError::Domain(m) => KernelError::Domain(format!("{place}: {m}")),
        KernelError::Unsupported(m) => KernelError::Unsupported(format!("{place}: {m}")),
        other => other,
    }
}

/// Row t of a float tensor that leads with the step axis.
fn row(x: &Tensor, t: usize) -> Result<Tensor, KernelError> {
    fn part<T: Clone>(a: &Array<T>, t: usize) -> Array<T> {
        let n = a.len() / a.dims()[0];
        Array::new(
            a.dims()[1..].to_vec(),
            a.data()[t * n..(t + 1) * n].to_vec(),
        )
        .expect("a row of a stacked array has the row's length")
    }
    match x {
        Tensor::F32(a) => Ok(Tensor::F32(part(a, t))),
        Tensor::F64(a) => Ok(Tensor::F64(part(a, t))),
        other => Err(KernelError::Unsupported(format!(
            "scan reads f32 or f64, found {}",
            other.dtype()
        ))),
    }
}

/// The packed value being written: one buffer of the scan's dtype.
enum Packed {
    F32(crate::tensor::alloc::Elems<f32>),
    F64(crate::tensor::alloc::Elems<f64>),
}

impl Packed {
    fn zeros(dtype: DType, n: usize) -> Result<Packed, KernelError> {
        Ok(match dtype {
            DType::F32 => Packed::F32(crate::tensor::alloc::filled(n, 0.0)?),
            _ => Packed::F64(crate::tensor::alloc::filled(n, 0.0)?),
        })
    }

    /// Copies `x`'s elements in at `at`.
    fn write(&mut self, at: usize, x: &Tensor) -> Result<(), KernelError> {
        match (self, x) {
            (Packed::F32(o), Tensor::F32(a)) => o[at..at + a.len()].copy_from_slice(a.data()),
            (Packed::F64(o), Tensor::F64(a)) => o[at..at + a.len()].copy_from_slice(a.data()),
            (_, x) => {
                return Err(KernelError::Unsupported(format!(
                    "scan's body gave a {} value, expected the scan's dtype",
                    x.dtype()
                )))
            }
        }
        Ok(())
    }

    fn into_tensor(self) -> Result<Tensor, KernelError> {
        let bad = |e: crate::tensor::TensorError| KernelError::Unsupported(e.to_string());
        Ok(match self {
            Packed::F32(v) => Tensor::F32(Array::with_elems([v.len()], v).map_err(bad)?),
            Packed::F64(v) => Tensor::F64(Array::with_elems([v.len()], v).map_err(bad)?),
        })
    }
}

impl Primitive for Scan {
    fn name(&self) -> &str {
        crate::prim::names::SCAN
    }
    fn formula(&self) -> Option<&'static str> {
        Some("c_{t+1}, y_t = body(c_t, x_t, consts); value = pack(c.., y..)")
    }
    fn attrs(&self) -> Attrs {
        attrs_of([
            ("length", self.length.into()),
            ("carries", self.carries.into()),
            ("xs", self.xs.into()),
            ("consts", self.consts.into()),
            ("reverse", self.reverse.into()),
            ("stack_carries", self.stack_carries.into()),
        ])
    }
    fn body(&self) -> Option<&Program> {
        Some(&self.body)
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_scan))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        let n = self.carries + self.xs + self.consts;
        if inputs.len() != n {
            return Err(TypeError::Arity {
                expected: n.to_string(),
                found: inputs.len(),
            });
        }
        for (index, (found, input)) in inputs.iter().zip(self.body.inputs()).enumerate() {
            let is_x = (self.carries..self.carries + self.xs).contains(&index);
            let expected = if is_x {
                stacked(&input.ty, self.length)
            } else {
                input.ty.clone()
            };
            if *found != expected {
                let role = if index < self.carries {
                    "an initial carry"
                } else if is_x {
                    "a stacked x"
                } else {
                    "a const"
                };
                return Err(TypeError::Operand {
                    index,
                    expected: format!("{expected} ({role}, body input `{}`)", input.name),
                    found: found.clone(),
                });
            }
        }
        let len = self
            .packed_len()
            .filter(|&l| l <= Shape::MAX_NUMEL)
            .ok_or_else(|| TypeError::Invalid("scan: its results have too many elements".into()))?;
        Ok(TensorType::new(self.dtype(), [len]))
    }
    fn eval(&self, inputs: &[&Tensor]) -> Result<Tensor, KernelError> {
        let (nc, nx) = (self.carries, self.xs);
        let ty = self
            .infer(&inputs.iter().map(|t| t.ty()).collect::<Vec<_>>())
            .map_err(|e| KernelError::Unsupported(e.to_string()))?;
        let mut out = Packed::zeros(ty.dtype, ty.numel())?;
        let layout = self.layout();
        let mut carry: Vec<Tensor> = inputs[..nc].iter().map(|&t| t.clone()).collect();
        let consts: Vec<Tensor> = inputs[nc + nx..].iter().map(|&t| t.clone()).collect();
        for s in 0..self.length {
            let t = if self.reverse { self.length - 1 - s } else { s };
            let mut args = std::mem::take(&mut carry);
            for x in &inputs[nc..nc + nx] {
                args.push(row(x, t)?);
            }
            args.extend(consts.iter().cloned());
            let mut results = self.step(t, args)?;
            let ys = results.split_off(nc);
            for (piece, at, pty) in &layout {
                match *piece {
                    Piece::Carry(k) if self.stack_carries => {
                        out.write(at + t * (pty.numel() / self.length), &results[k])?
                    }
                    Piece::Carry(_) => {}
                    Piece::Y(k) => out.write(at + t * (pty.numel() / self.length), &ys[k])?,
                }
            }
            carry = results;
        }
        if !self.stack_carries {
            for (piece, at, _) in &layout {
                if let Piece::Carry(k) = *piece {
                    out.write(*at, &carry[k])?;
                }
            }
        }
        out.into_tensor()
    }
    /// T times the body's flops.
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        let body = &*self.body;
        let per_step: u64 = body
            .nodes()
            .iter()
            .map(|n| {
                let types: Vec<TensorType> =
                    n.operands.iter().map(|&o| body.ty(o).clone()).collect();
                n.prim.flops(&types, &n.ty)
            })
            .fold(0, u64::saturating_add);
        per_step.saturating_mul(self.length as u64)
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        super::rules::jvp(self, b, x, dx).map(Some)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dy: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        super::rules::vjp(self, b, x, y, dy)
    }
    fn batch(
        &self,
        b: &mut Builder,
        x: &[Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<Var, RuleError> {
        super::batch::batch(self, b, x, at)
    }
}

/// A scan over the leading axis of a drawn value: c' = tanh(c w + x_t) from a drawn initial
/// carry, with a weight w; its final carry, in [-1, 1].
fn draw_scan(d: &mut dyn crate::ir::Draw) -> Result<crate::ir::Drawn, crate::ir::DrawError> {
    use crate::prim::Ops;
    let x = d.pick();
    let x = d.ranked(x)?;
    let ty = d.ty(x.var);
    let row = TensorType::new(ty.dtype, ty.dims()[1..].to_vec());
    let c0 = d.weight(&row)?;
    let w = d.weight(&row)?;
    let body = (|| -> Result<Program, String> {
        let text = |e: &dyn std::fmt::Display| e.to_string();
        let mut b = Builder::new();
        let c = b
            .input("c", row.clone(), crate::ir::InputKind::Data)
            .map_err(|e| text(&e))?;
        let xt = b
            .input("x", row.clone(), crate::ir::InputKind::Data)
            .map_err(|e| text(&e))?;
        let wk = b
            .input("w", row.clone(), crate::ir::InputKind::Data)
            .map_err(|e| text(&e))?;
        let cw = b.mul(c, wk).map_err(|e| text(&e))?;
        let a = b.add(cw, xt).map_err(|e| text(&e))?;
        let h = b.tanh(a).map_err(|e| text(&e))?;
        b.finish(&[h]).map_err(|e| text(&e))
    })()
    .map_err(TypeError::Invalid)?;
    let scan = Scan::new(body, ty.dims()[0], 1, 1, 1)?;
    d.same(crate::ir::Interval::new(-1.0, 1.0), |b| {
        Ok(super::build::scan(b, scan, &[c0.var], &[x.var], &[w.var])?.final_carries[0])
    })
}

pub(crate) fn register(r: &mut Registry) {
    r.register_with_body(crate::prim::names::SCAN, |attrs: &Attrs, body: Program| {
        let mut a = AttrReader::new(attrs);
        let length = a.usize("length")?;
        let carries = a.usize("carries")?;
        let xs = a.usize("xs")?;
        let consts = a.usize("consts")?;
        let reverse = a.flag("reverse")?;
        let stack = match a.get("stack_carries") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| {
                TypeError::attr("stack_carries", format!("expected a boolean, found {v}"))
            })?,
        };
        a.finish()?;
        let scan = Scan::new(body, length, carries, xs, consts)?
            .reversed(reverse)
            .stacking_carries(stack);
        Ok(Arc::new(scan) as Prim)
    });
    // A running sum over two steps of f64[1].
    let mut b = Builder::new();
    let ty = TensorType::new(DType::F64, [1]);
    let c = b.input("c", ty.clone(), crate::ir::InputKind::Data);
    let x = b.input("x", ty, crate::ir::InputKind::Data);
    let body = match (c, x) {
        (Ok(c), Ok(x)) => crate::prim::Ops::add(&mut b, c, x)
            .ok()
            .and_then(|s| b.finish(&[s]).ok()),
        _ => None,
    };
    if let Some(body) = body {
        let attrs = attrs_of([
            ("length", 2.into()),
            ("carries", 1.into()),
            ("xs", 1.into()),
            ("consts", 0.into()),
        ]);
        r.set_example_with_body(crate::prim::names::SCAN, attrs, body);
    }
}
