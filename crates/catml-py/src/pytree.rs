//! Pytrees: nested dicts, lists and tuples of leaves, flattened to their leaves in order and a
//! tree definition, and rebuilt from them. Dicts (and dict subclasses, through their own
//! iteration and indexing) are flattened in sorted key order, as JAX does; a namedtuple is a
//! leaf; `None` is an empty node. Python sees a tree definition as nested tuples (`("*",)`,
//! `("None",)`, `("dict", keys, children)`, `("list", children)`, `("tuple", children)`), which
//! are hashable and compare by value.

use std::hash::{Hash, Hasher};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::errors::{raise, Kind};

/// The nesting of a pytree.
#[derive(Debug)]
pub enum Tree {
    Leaf,
    None,
    /// Keys in sorted order and the child under each.
    Dict(Vec<Py<PyAny>>, Vec<Tree>),
    List(Vec<Tree>),
    Tuple(Vec<Tree>),
}

/// Appends the leaves of `obj` to `leaves` in order and returns its tree.
pub fn flatten<'py>(
    obj: &Bound<'py, PyAny>,
    leaves: &mut Vec<Bound<'py, PyAny>>,
) -> PyResult<Tree> {
    if let Ok(d) = obj.cast_exact::<PyDict>() {
        // An exact dict: its keys sorted as `sorted` sorts them, values read without a call.
        let keys = d.keys();
        sort_keys(&keys)?;
        let mut children = Vec::with_capacity(keys.len());
        let mut names = Vec::with_capacity(keys.len());
        for k in keys.iter() {
            let Some(v) = d.get_item(&k)? else {
                return Err(raise(
                    Kind::Type,
                    "a dict changed while it was flattened".to_string(),
                ));
            };
            children.push(flatten(&v, leaves)?);
            names.push(k.unbind());
        }
        return Ok(Tree::Dict(names, children));
    }
    if obj.is_none() {
        return Ok(Tree::None);
    }
    if obj.is_instance_of::<PyDict>() {
        // A dict subclass: its own iteration and indexing, as `sorted(d)` and `d[k]` use them.
        let keys = PyList::empty(obj.py());
        for k in obj.try_iter().map_err(|e| odd_dict(obj, e))? {
            keys.append(k.map_err(|e| odd_dict(obj, e))?)?;
        }
        sort_keys(&keys)?;
        let mut children = Vec::with_capacity(keys.len());
        let mut names = Vec::with_capacity(keys.len());
        for k in keys.iter() {
            let v = obj.get_item(&k).map_err(|e| odd_dict(obj, e))?;
            children.push(flatten(&v, leaves)?);
            names.push(k.unbind());
        }
        return Ok(Tree::Dict(names, children));
    }
    if let Ok(t) = obj.cast_exact::<PyTuple>() {
        let children = t
            .iter()
            .map(|x| flatten(&x, leaves))
            .collect::<PyResult<_>>()?;
        return Ok(Tree::Tuple(children));
    }
    if let Ok(l) = obj.cast_exact::<PyList>() {
        let children = l
            .iter()
            .map(|x| flatten(&x, leaves))
            .collect::<PyResult<_>>()?;
        return Ok(Tree::List(children));
    }
    // Subclasses through their own iteration; a namedtuple (a tuple with `_fields`) is a leaf.
    let is_tuple = obj.is_instance_of::<PyTuple>() && !obj.hasattr("_fields")?;
    if is_tuple || obj.is_instance_of::<PyList>() {
        let mut children = Vec::new();
        for x in obj.try_iter()? {
            children.push(flatten(&x?, leaves)?);
        }
        return Ok(if is_tuple {
            Tree::Tuple(children)
        } else {
            Tree::List(children)
        });
    }
    leaves.push(obj.clone());
    Ok(Tree::Leaf)
}

fn sort_keys(keys: &Bound<'_, PyList>) -> PyResult<()> {
    keys.sort().map_err(|e| {
        raise(
            Kind::Type,
            format!("the keys of a dict argument cannot be sorted ({e}); use keys of one type, such as str"),
        )
    })
}

fn odd_dict(obj: &Bound<'_, PyAny>, e: PyErr) -> PyErr {
    let name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "dict subclass".into());
    raise(
        Kind::Type,
        format!("a {name} argument could not be read as a dict of its keys ({e})"),
    )
}

impl Tree {
    /// The number of leaves.
    pub fn n_leaves(&self) -> usize {
        match self {
            Tree::Leaf => 1,
            Tree::None => 0,
            Tree::Dict(_, c) | Tree::List(c) | Tree::Tuple(c) => c.iter().map(Tree::n_leaves).sum(),
        }
    }

    /// Hashes the structure and the keys' Python hashes.
    pub fn hash_into(&self, py: Python<'_>, h: &mut impl Hasher) -> PyResult<()> {
        match self {
            Tree::Leaf => 0u8.hash(h),
            Tree::None => 1u8.hash(h),
            Tree::Dict(keys, c) => {
                2u8.hash(h);
                c.len().hash(h);
                for (k, c) in keys.iter().zip(c) {
                    k.bind(py).hash()?.hash(h);
                    c.hash_into(py, h)?;
                }
            }
            Tree::List(c) | Tree::Tuple(c) => {
                (if matches!(self, Tree::List(_)) {
                    3u8
                } else {
                    4u8
                })
                .hash(h);
                c.len().hash(h);
                for c in c {
                    c.hash_into(py, h)?;
                }
            }
        }
        Ok(())
    }

    /// Whether the two trees are the same: the same nesting, and keys equal as Python compares
    /// them.
    pub fn same(&self, py: Python<'_>, other: &Tree) -> bool {
        let all = |a: &[Tree], b: &[Tree]| {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.same(py, b))
        };
        match (self, other) {
            (Tree::Leaf, Tree::Leaf) | (Tree::None, Tree::None) => true,
            (Tree::Dict(ka, a), Tree::Dict(kb, b)) => {
                ka.len() == kb.len()
                    && ka
                        .iter()
                        .zip(kb)
                        .all(|(x, y)| x.is(y) || x.bind(py).eq(y.bind(py)).unwrap_or(false))
                    && all(a, b)
            }
            (Tree::List(a), Tree::List(b)) | (Tree::Tuple(a), Tree::Tuple(b)) => all(a, b),
            _ => false,
        }
    }

    /// Whether `obj` flattens to this tree when it is made of exact dicts, lists, tuples and
    /// `None` only: then calls `leaf` on its leaves in order, and stops at the first that
    /// returns false. A dict matches when it has as many keys and each of this tree's keys,
    /// which then are its keys in sorted order. False for anything else (subclasses included),
    /// which is for `flatten` to decide; false never means that `obj` has another tree.
    pub fn matches<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        leaf: &mut impl FnMut(&Bound<'py, PyAny>) -> bool,
    ) -> bool {
        match self {
            Tree::Leaf => {
                !obj.is_exact_instance_of::<PyDict>()
                    && !obj.is_exact_instance_of::<PyList>()
                    && !obj.is_exact_instance_of::<PyTuple>()
                    && leaf(obj)
            }
            Tree::None => obj.is_none(),
            Tree::Dict(keys, c) => {
                let Ok(d) = obj.cast_exact::<PyDict>() else {
                    return false;
                };
                d.len() == keys.len()
                    && keys
                        .iter()
                        .zip(c)
                        .all(|(k, c)| match d.get_item(k.bind(obj.py())) {
                            Ok(Some(v)) => c.matches(&v, leaf),
                            _ => false,
                        })
            }
            Tree::List(c) => obj.cast_exact::<PyList>().is_ok_and(|l| {
                l.len() == c.len() && c.iter().zip(l.iter()).all(|(c, x)| c.matches(&x, leaf))
            }),
            Tree::Tuple(c) => obj.cast_exact::<PyTuple>().is_ok_and(|t| {
                t.len() == c.len() && c.iter().zip(t.iter()).all(|(c, x)| c.matches(&x, leaf))
            }),
        }
    }

    /// The Python tree definition.
    pub fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let children = |c: &[Tree]| -> PyResult<Bound<'py, PyTuple>> {
            PyTuple::new(
                py,
                c.iter()
                    .map(|c| c.to_py(py))
                    .collect::<PyResult<Vec<_>>>()?,
            )
        };
        match self {
            Tree::Leaf => PyTuple::new(py, ["*"]),
            Tree::None => PyTuple::new(py, ["None"]),
            Tree::Dict(keys, c) => PyTuple::new(
                py,
                [
                    PyString::new(py, "dict").into_any(),
                    PyTuple::new(py, keys.iter().map(|k| k.bind(py)))?.into_any(),
                    children(c)?.into_any(),
                ],
            ),
            Tree::List(c) => PyTuple::new(
                py,
                [
                    PyString::new(py, "list").into_any(),
                    children(c)?.into_any(),
                ],
            ),
            Tree::Tuple(c) => PyTuple::new(
                py,
                [
                    PyString::new(py, "tuple").into_any(),
                    children(c)?.into_any(),
                ],
            ),
        }
    }

    /// The tree of a Python tree definition.
    pub fn from_py(def: &Bound<'_, PyAny>) -> PyResult<Tree> {
        let bad = || raise(Kind::Type, format!("not a tree definition: {def}"));
        let t = def.cast::<PyTuple>().map_err(|_| bad())?;
        let kind: String = t
            .get_item(0)
            .map_err(|_| bad())?
            .extract()
            .map_err(|_| bad())?;
        let children = |i: usize| -> PyResult<Vec<Tree>> {
            t.get_item(i)
                .map_err(|_| bad())?
                .cast::<PyTuple>()
                .map_err(|_| bad())?
                .iter()
                .map(|c| Tree::from_py(&c))
                .collect()
        };
        match (kind.as_str(), t.len()) {
            ("*", 1) => Ok(Tree::Leaf),
            ("None", 1) => Ok(Tree::None),
            ("list", 2) => Ok(Tree::List(children(1)?)),
            ("tuple", 2) => Ok(Tree::Tuple(children(1)?)),
            ("dict", 3) => {
                let keys: Vec<Py<PyAny>> = t
                    .get_item(1)?
                    .cast::<PyTuple>()
                    .map_err(|_| bad())?
                    .iter()
                    .map(Bound::unbind)
                    .collect();
                let c = children(2)?;
                if keys.len() != c.len() {
                    return Err(bad());
                }
                Ok(Tree::Dict(keys, c))
            }
            _ => Err(bad()),
        }
    }

    /// The tree holding the next leaves of `leaves` (which has at least `n_leaves` of them).
    pub fn unflatten<'py>(
        &self,
        py: Python<'py>,
        leaves: &mut impl Iterator<Item = Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let short = || raise(Kind::Type, "too few leaves for the tree definition");
        let items = |c: &[Tree], leaves: &mut _| -> PyResult<Vec<Bound<'py, PyAny>>> {
            c.iter().map(|c| c.unflatten(py, leaves)).collect()
        };
        Ok(match self {
            Tree::Leaf => leaves.next().ok_or_else(short)?,
            Tree::None => py.None().into_bound(py),
            Tree::Dict(keys, c) => {
                let d = PyDict::new(py);
                for (k, c) in keys.iter().zip(c) {
                    d.set_item(k.bind(py), c.unflatten(py, leaves)?)?;
                }
                d.into_any()
            }
            Tree::List(c) => PyList::new(py, items(c, leaves)?)?.into_any(),
            Tree::Tuple(c) => PyTuple::new(py, items(c, leaves)?)?.into_any(),
        })
    }
}

/// `(leaves, treedef)` of a pytree.
#[pyfunction]
pub fn tree_flatten<'py>(
    py: Python<'py>,
    tree: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyTuple>)> {
    let mut leaves = Vec::new();
    let def = flatten(tree, &mut leaves)?;
    Ok((PyList::new(py, leaves)?, def.to_py(py)?))
}

/// The tree of `treedef` holding `leaves` in order (exactly as many as it has).
#[pyfunction]
pub fn tree_unflatten<'py>(
    py: Python<'py>,
    treedef: &Bound<'py, PyAny>,
    leaves: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let tree = Tree::from_py(treedef)?;
    if leaves.len() != tree.n_leaves() {
        return Err(raise(
            Kind::Type,
            format!(
                "the tree definition has {} leaves, found {}",
                tree.n_leaves(),
                leaves.len()
            ),
        ));
    }
    tree.unflatten(py, &mut leaves.into_iter())
}
