use std::collections::BTreeMap;
use std::sync::Arc;

use super::attrs::AttrReader;
use super::primitive::{Attrs, Prim, TypeError};
use super::Program;

/// Builds a primitive from its LensIR attributes.
pub type Constructor = Arc<dyn Fn(&Attrs) -> Result<Prim, TypeError> + Send + Sync>;

/// Builds a primitive that holds a nested program (a LensIR node's `body`) from its attributes
/// and that program.
pub type BodyConstructor = Arc<dyn Fn(&Attrs, Program) -> Result<Prim, TypeError> + Send + Sync>;

/// Name -> primitive constructor: what a module file may name in `op`. `prim::registry()` holds
/// the built-in set; users add their own primitives with [`Registry::register`].
#[derive(Clone, Default)]
pub struct Registry {
    ctors: BTreeMap<String, Constructor>,
    /// Primitives built around a nested program; their plain constructor refuses to build
    /// without one.
    body_ctors: BTreeMap<String, BodyConstructor>,
    /// Attributes of one valid instance, for primitives that have required attributes.
    examples: BTreeMap<String, Attrs>,
    /// The body of that instance, for primitives built around a nested program.
    example_bodies: BTreeMap<String, Program>,
    /// Earlier names still read, and the names they stand for.
    aliases: BTreeMap<String, String>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.ctors.keys()).finish()
    }
}

impl Registry {
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// Adds (or replaces) a primitive under `name`.
    pub fn register(
        &mut self,
        name: &str,
        ctor: impl Fn(&Attrs) -> Result<Prim, TypeError> + Send + Sync + 'static,
    ) {
        self.ctors.insert(name.to_string(), Arc::new(ctor));
    }

    /// Adds a primitive built around a nested program: a node naming it must have a `body`.
    pub fn register_with_body(
        &mut self,
        name: &str,
        ctor: impl Fn(&Attrs, Program) -> Result<Prim, TypeError> + Send + Sync + 'static,
    ) {
        let owned = name.to_string();
        self.ctors.insert(
            name.to_string(),
            Arc::new(move |_: &Attrs| {
                Err(TypeError::Invalid(format!(
                    "`{owned}` runs a nested program: the node needs a `body`"
                )))
            }),
        );
        self.body_ctors.insert(name.to_string(), Arc::new(ctor));
    }

    /// Records the attributes of one valid instance of `name`, so that tools can ask an
    /// instance for the primitive's facts ([`Registry::example`]).
    pub fn set_example(&mut self, name: &str, attrs: Attrs) {
        self.examples.insert(name.to_string(), attrs);
    }

    /// Records attributes and a body of one valid instance of a primitive built around a
    /// nested program.
    pub fn set_example_with_body(&mut self, name: &str, attrs: Attrs, body: Program) {
        self.examples.insert(name.to_string(), attrs);
        self.example_bodies.insert(name.to_string(), body);
    }

    /// One instance of `name`: with its recorded example attributes (and body), else with none.
    pub fn example(&self, name: &str) -> Option<Prim> {
        let empty = Attrs::new();
        let attrs = self.examples.get(name).unwrap_or(&empty);
        let body = self.example_bodies.get(name).cloned();
        self.construct_with_body(name, attrs, body)?.ok()
    }

    /// This registry with `prim` added under its name, taking no attributes: how a
    /// [`CustomPrimitive`](crate::prim::CustomPrimitive) joins the built-ins in one expression.
    ///
    /// ```
    /// use catml_core::ir::{json, InputKind, Registry};
    /// use catml_core::prim::{self, CustomPrimitive};
    ///
    /// let double = CustomPrimitive::new("double", |t| Ok(t[0].clone()), |x| {
    ///     Ok(x[0].map_f64(|v| 2.0 * v))
    /// });
    /// let registry = prim::registry().with(double.into_prim());
    /// let text = r#"{"inputs": [{"name": "x", "dtype": "f64", "shape": [2]}],
    ///   "nodes": [{"name": "y", "op": "double", "operands": ["x"]}], "outputs": ["y"]}"#;
    /// assert!(json::from_str(text, &registry).is_ok());
    /// assert!(json::from_str(text, prim::builtins()).is_err());
    /// ```
    pub fn with(mut self, prim: Prim) -> Registry {
        let name = prim.name().to_string();
        self.register(&name, move |attrs| {
            AttrReader::new(attrs).finish()?;
            Ok(prim.clone())
        });
        self
    }

    /// Reads `old` as `name` from now on: modules written with an earlier name of a primitive
    /// still load (and are written back with `name`). `names` does not list aliases.
    pub fn alias(&mut self, old: &str, name: &str) {
        self.aliases.insert(old.to_string(), name.to_string());
    }

    pub fn contains(&self, name: &str) -> bool {
        self.ctors.contains_key(name) || self.aliases.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.ctors.keys().map(|s| s.as_str())
    }

    /// The primitive `name` with these attributes: `None` if the name is unknown.
    pub fn construct(&self, name: &str, attrs: &Attrs) -> Option<Result<Prim, TypeError>> {
        let name = self.aliases.get(name).map_or(name, String::as_str);
        self.ctors.get(name).map(|c| c(attrs))
    }

    /// The primitive `name` with these attributes and, for a primitive built around a nested
    /// program, that `body`: `None` if the name is unknown; a type error when a body is given
    /// to a primitive that takes none.
    pub fn construct_with_body(
        &self,
        name: &str,
        attrs: &Attrs,
        body: Option<Program>,
    ) -> Option<Result<Prim, TypeError>> {
        let name = self.aliases.get(name).map_or(name, String::as_str);
        let Some(body) = body else {
            return self.construct(name, attrs);
        };
        match self.body_ctors.get(name) {
            Some(c) => Some(c(attrs, body)),
            None if self.ctors.contains_key(name) => {
                Some(Err(TypeError::Invalid(format!("`{name}` takes no `body`"))))
            }
            None => None,
        }
    }
}
