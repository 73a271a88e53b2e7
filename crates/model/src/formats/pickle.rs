//! A restricted, bounded unpickler for the pickles inside PyTorch checkpoints.
//!
//! It reads the opcodes `torch.save` writes (protocol 2, plus the few protocol 3–5 additions a
//! re-saved file may carry) into plain [`Value`]s and never runs anything: `GLOBAL` yields a
//! name, `REDUCE`/`NEWOBJ` a [`Value::Call`] record of "call this with these arguments" that
//! the checkpoint reader interprets for a whitelist of torch's tensor-rebuild functions, and
//! `BINPERSID` a [`Value::PersistentId`] naming a storage. The only call evaluated here is
//! `collections.OrderedDict()`, which becomes an empty dict.
//!
//! Why not candle's `pickle::Stack`: it cannot be bounded from outside. A memo reference
//! (`BINGET`) deep-copies the memoised object, so a 1.5 KB "billion laughs" pickle whose memo
//! entries reference the previous one twice, 40 times over, asks for 2⁴⁰ objects; `BINUNICODE`
//! allocates the length it reads (up to 4 GB) before reading; nothing limits the stack, so a
//! flood of `NONE` opcodes grows it by 24 bytes per input byte; and its tensor-record reader
//! indexes tuples without checking their length (a panic). A pre-scan that made candle's parser
//! safe would have to model its copying exactly, which is as much code as this reader. So:
//!
//! - memo references share (`Rc`), never copy; values are immutable, so no reference cycles;
//! - every container built or grown, every memo entry and every string byte is charged to a
//!   memory budget ([`Limits::memory`]) proportional to the file's size, every opcode to an
//!   opcode budget, and the stack has a length limit; one [`Budget`] can span several pickles
//!   (the legacy format has five in a row);
//! - nesting is capped ([`Limits::depth`]), so dropping or walking a value never recurses deeply;
//! - lengths read from the file are checked against the input before anything is allocated.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::rc::Rc;

/// Bounds on the work one pickle may cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Opcodes executed.
    pub ops: u64,
    /// Approximate bytes of memory the values may take: each stack slot, container slot and
    /// string byte counts, and each container or record a fixed overhead.
    pub memory: u64,
    /// Deepest nesting of containers and records.
    pub depth: u32,
    /// Entries on the unpickling stack at once (a real checkpoint's stack holds a batch of at
    /// most 1000 dict entries plus the nesting around it).
    pub stack: usize,
}

impl Limits {
    /// Limits for a pickle inside a file of `file_len` bytes: at most one opcode per byte;
    /// 4 MiB plus twice the file's size of memory; a stack of at most 65,536 entries plus one
    /// per 16 bytes (and never over 2²⁰). A real checkpoint's pickle is well under 1 % of its
    /// file (the rest is tensor data; 0.02 % for bert-base) and takes about five times its own
    /// size in memory, and its stack holds one batch of at most 1,000 dict entries plus the
    /// nesting around it; a hostile file made of nothing but pickle is stopped once it costs
    /// about twice its size.
    pub fn for_file(file_len: u64) -> Limits {
        Limits {
            ops: file_len.saturating_add(1024),
            memory: (4 << 20) + file_len.saturating_mul(2),
            depth: 64,
            stack: (65_536 + file_len / 16).min(1 << 20) as usize,
        }
    }
}

/// What a reader has spent of its [`Limits`], across one or more pickles.
#[derive(Clone, Debug)]
pub struct Budget {
    limits: Limits,
    ops: u64,
    memory: u64,
}

impl Budget {
    /// Nothing spent yet.
    pub fn new(limits: Limits) -> Budget {
        Budget {
            limits,
            ops: 0,
            memory: 0,
        }
    }
}

/// A Python value as the pickle describes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(Rc<String>),
    /// A module-level name (`GLOBAL`): never imported, only compared.
    Global(Rc<Global>),
    /// A tuple.
    Tuple(Rc<Seq>),
    /// A list.
    List(Rc<Seq>),
    /// A dict (or `OrderedDict`), entries in the order they were set.
    Dict(Rc<Dict>),
    /// `callable(*args)` as a record (`REDUCE`, `NEWOBJ`); nothing is called.
    Call(Rc<Call>),
    /// An object with state set on it (`BUILD`) other than a dict.
    Build(Rc<Call>),
    /// A persistent id (`BINPERSID`): in torch checkpoints, a storage.
    PersistentId(Rc<Seq>),
}

/// `module.name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Global {
    /// The module, e.g. `torch._utils`.
    pub module: String,
    /// The name, e.g. `_rebuild_tensor_v2`.
    pub name: String,
}

/// The items of a tuple, list or persistent id.
#[derive(Clone, Debug, PartialEq)]
pub struct Seq {
    /// The items.
    pub items: Vec<Value>,
    depth: u32,
}

/// The entries of a dict.
#[derive(Clone, Debug, PartialEq)]
pub struct Dict {
    /// `(key, value)` pairs in insertion order.
    pub items: Vec<(Value, Value)>,
    depth: u32,
}

/// A recorded call or state application.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The callable (usually a [`Value::Global`]) or object.
    pub callable: Value,
    /// The arguments (usually a tuple) or state.
    pub args: Value,
    depth: u32,
}

impl Value {
    /// Nesting depth: 0 for scalars and strings.
    fn depth(&self) -> u32 {
        match self {
            Value::Tuple(s) | Value::List(s) | Value::PersistentId(s) => s.depth,
            Value::Dict(d) => d.depth,
            Value::Call(c) | Value::Build(c) => c.depth,
            _ => 0,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is one (booleans are not).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The items, if this is a tuple.
    pub fn as_tuple(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(s) => Some(&s.items),
            _ => None,
        }
    }

    /// `(module, name)`, if this is a global.
    pub fn as_global(&self) -> Option<(&str, &str)> {
        match self {
            Value::Global(g) => Some((&g.module, &g.name)),
            _ => None,
        }
    }

    /// A short description for error messages (never the whole value).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an int",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::Global(_) => "a global name",
            Value::Tuple(_) => "a tuple",
            Value::List(_) => "a list",
            Value::Dict(_) => "a dict",
            Value::Call(_) => "a call",
            Value::Build(_) => "an object",
            Value::PersistentId(_) => "a persistent id",
        }
    }
}

/// Why a pickle was not read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PickleError {
    /// A budget of [`Limits`] ran out.
    #[error("its pickle {}, far more than a real checkpoint of this size (stopped at byte {at} of the pickle); the file is damaged or malicious", budget_text(what, *limit))]
    Budget {
        /// `memory` (bytes), `opcodes`, `nesting` (levels) or `stack` (entries).
        what: &'static str,
        /// The limit that was reached.
        limit: u64,
        /// Offset of the opcode that reached it.
        at: u64,
    },
    /// An opcode outside the subset torch checkpoints use.
    #[error(
        "its pickle uses opcode 0x{op:02x} at byte {at}, which PyTorch checkpoints never contain"
    )]
    Unsupported {
        /// The opcode.
        op: u8,
        /// Its offset.
        at: u64,
    },
    /// The pickle ends before its STOP opcode, or a length runs past the end.
    #[error("its pickle is cut short (at byte {at})")]
    Truncated {
        /// Where the data ran out.
        at: u64,
    },
    /// Anything else malformed.
    #[error("its pickle is malformed at byte {at}: {what}")]
    Malformed {
        /// Offset of the opcode.
        at: u64,
        /// What is wrong.
        what: Malformation,
    },
}

/// What is malformed in a pickle.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformation {
    /// A rule of the pickle machine that an opcode breaks.
    #[error("{0}")]
    Rule(&'static str),
    /// A memo entry read before it was set.
    #[error("memo entry {0} is read before it is set")]
    MemoUnset(u32),
    /// An integer longer than 8 bytes.
    #[error("an integer of {0} bytes")]
    IntegerBytes(u32),
}

impl From<&'static str> for Malformation {
    fn from(rule: &'static str) -> Self {
        Malformation::Rule(rule)
    }
}

fn budget_text(what: &str, limit: u64) -> String {
    match what {
        "memory" => format!("would take over {limit} bytes of memory"),
        "opcodes" => format!("runs over {limit} opcodes"),
        "nesting" => format!("nests values over {limit} levels deep"),
        _ => format!("piles over {limit} values on its stack"),
    }
}

/// Approximate heap cost of one container or record (the `Rc` allocation and its header).
const NODE_COST: u64 = 64;
/// Cost of one container slot.
const SLOT_COST: u64 = std::mem::size_of::<Value>() as u64;
/// Cost of one memo entry (a hash-map slot holding a value).
const MEMO_COST: u64 = 48;
/// The longest `GLOBAL` module or name line accepted.
const MAX_NAME: u64 = 256;

enum Slot {
    Value(Value),
    Mark,
}

struct Machine<'b> {
    limits: Limits,
    spent: &'b mut Budget,
    stack: Vec<Slot>,
    memo: HashMap<u32, Value>,
    /// Offset of the current opcode.
    at: u64,
}

/// Read one pickle, up to and including its STOP opcode, from `r`, spending from `budget`. `r`
/// is left just after the STOP opcode (the legacy format has several pickles in a row).
pub fn read(r: &mut impl BufRead, budget: &mut Budget) -> Result<Value, PickleError> {
    let mut m = Machine {
        limits: budget.limits,
        spent: budget,
        stack: Vec::new(),
        memo: HashMap::new(),
        at: 0,
    };
    let mut input = Counted { inner: r, pos: 0 };
    loop {
        m.at = input.pos;
        let op = input.u8()?;
        m.spent.ops += 1;
        if m.spent.ops > m.limits.ops {
            return Err(m.budget("opcodes", m.limits.ops));
        }
        if m.step(op, &mut input)? {
            break;
        }
    }
    match m.stack.pop() {
        Some(Slot::Value(v)) => Ok(v),
        _ => Err(m.malformed("STOP with nothing to return")),
    }
}

/// The input, with the number of bytes consumed.
struct Counted<'a, R> {
    inner: &'a mut R,
    pos: u64,
}

impl<R: BufRead> Counted<'_, R> {
    fn exact<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut buf = [0u8; N];
        self.inner
            .read_exact(&mut buf)
            .map_err(|_| PickleError::Truncated { at: self.pos })?;
        self.pos += N as u64;
        Ok(buf)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.exact::<1>()?[0])
    }

    /// `len` bytes, read in pieces so that a false length allocates nothing it cannot fill.
    fn bytes(&mut self, len: u64) -> Result<Vec<u8>, PickleError> {
        let mut buf = Vec::new();
        let got = (&mut *self.inner)
            .take(len)
            .read_to_end(&mut buf)
            .map_err(|_| PickleError::Truncated { at: self.pos })?;
        self.pos += got as u64;
        if (got as u64) < len {
            return Err(PickleError::Truncated { at: self.pos });
        }
        Ok(buf)
    }

    /// A line ending in `\n` (without it), of at most `max` bytes.
    fn line(&mut self, max: u64) -> Result<Vec<u8>, PickleError> {
        let mut buf = Vec::new();
        let got = (&mut *self.inner)
            .take(max + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|_| PickleError::Truncated { at: self.pos })?;
        self.pos += got as u64;
        if buf.pop() != Some(b'\n') {
            return Err(PickleError::Truncated { at: self.pos });
        }
        Ok(buf)
    }
}

impl Machine<'_> {
    fn budget(&self, what: &'static str, limit: u64) -> PickleError {
        PickleError::Budget {
            what,
            limit,
            at: self.at,
        }
    }

    fn malformed(&self, what: impl Into<Malformation>) -> PickleError {
        PickleError::Malformed {
            at: self.at,
            what: what.into(),
        }
    }

    fn charge(&mut self, bytes: u64) -> Result<(), PickleError> {
        self.spent.memory = self.spent.memory.saturating_add(bytes);
        if self.spent.memory > self.limits.memory {
            return Err(self.budget("memory", self.limits.memory));
        }
        Ok(())
    }

    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        if v.depth() > self.limits.depth {
            return Err(self.budget("nesting", self.limits.depth as u64));
        }
        if self.stack.len() >= self.limits.stack {
            return Err(self.budget("stack", self.limits.stack as u64));
        }
        self.stack.push(Slot::Value(v));
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, PickleError> {
        match self.stack.pop() {
            Some(Slot::Value(v)) => Ok(v),
            Some(Slot::Mark) => Err(self.malformed("a value was expected, found a mark")),
            None => Err(self.malformed("the stack is empty")),
        }
    }

    fn top(&mut self) -> Result<&mut Value, PickleError> {
        match self.stack.last_mut() {
            Some(Slot::Value(v)) => Ok(v),
            _ => Err(PickleError::Malformed {
                at: self.at,
                what: Malformation::Rule("a value was expected on the stack"),
            }),
        }
    }

    /// The values above the topmost mark, removing the mark.
    fn pop_to_mark(&mut self) -> Result<Vec<Value>, PickleError> {
        let mark = self
            .stack
            .iter()
            .rposition(|s| matches!(s, Slot::Mark))
            .ok_or_else(|| self.malformed("no mark on the stack"))?;
        let items = self
            .stack
            .split_off(mark + 1)
            .into_iter()
            .map(|s| match s {
                Slot::Value(v) => v,
                Slot::Mark => unreachable!("the mark found is the topmost"),
            })
            .collect();
        self.stack.pop();
        Ok(items)
    }

    fn seq(&mut self, items: Vec<Value>) -> Result<Rc<Seq>, PickleError> {
        self.charge(NODE_COST + SLOT_COST * items.len() as u64)?;
        let depth = 1 + items.iter().map(Value::depth).max().unwrap_or(0);
        Ok(Rc::new(Seq { items, depth }))
    }

    fn call(&mut self, callable: Value, args: Value) -> Result<Rc<Call>, PickleError> {
        self.charge(NODE_COST)?;
        let depth = 1 + callable.depth().max(args.depth());
        Ok(Rc::new(Call {
            callable,
            args,
            depth,
        }))
    }

    fn string(&mut self, bytes: Vec<u8>) -> Result<Value, PickleError> {
        self.charge(NODE_COST + bytes.len() as u64)?;
        let s = String::from_utf8(bytes).map_err(|_| self.malformed("a string is not UTF-8"))?;
        Ok(Value::Str(Rc::new(s)))
    }

    /// A string of `len` bytes, checked against the memory budget before it is read.
    fn read_string<R: BufRead>(
        &mut self,
        len: u64,
        input: &mut Counted<'_, R>,
    ) -> Result<Value, PickleError> {
        if self.spent.memory.saturating_add(len) > self.limits.memory {
            return Err(self.budget("memory", self.limits.memory));
        }
        let bytes = input.bytes(len)?;
        self.string(bytes)
    }

    /// Add items to the list on top of the stack (copying it first if the memo shares it).
    fn extend_list(&mut self, items: Vec<Value>) -> Result<(), PickleError> {
        let added = items.len() as u64;
        let depth = items.iter().map(Value::depth).max().unwrap_or(0);
        let Value::List(list) = self.top()? else {
            return Err(self.malformed("APPEND(S) to something that is not a list"));
        };
        let copied = if Rc::strong_count(list) > 1 {
            list.items.len() as u64
        } else {
            0
        };
        self.charge(SLOT_COST * (added + copied))?;
        if depth + 1 > self.limits.depth {
            return Err(self.budget("nesting", self.limits.depth as u64));
        }
        let Value::List(list) = self.top()? else {
            unreachable!("checked above")
        };
        let list = Rc::make_mut(list);
        list.depth = list.depth.max(depth + 1);
        list.items.extend(items);
        Ok(())
    }

    /// Add `(key, value)` pairs to the dict on top of the stack.
    fn extend_dict(&mut self, flat: Vec<Value>) -> Result<(), PickleError> {
        if !flat.len().is_multiple_of(2) {
            return Err(self.malformed("SETITEMS with an odd number of values"));
        }
        let added = flat.len() as u64;
        let depth = flat.iter().map(Value::depth).max().unwrap_or(0);
        let Value::Dict(dict) = self.top()? else {
            return Err(self.malformed("SETITEM(S) on something that is not a dict"));
        };
        let copied = if Rc::strong_count(dict) > 1 {
            2 * dict.items.len() as u64
        } else {
            0
        };
        self.charge(SLOT_COST * (added + copied))?;
        if depth + 1 > self.limits.depth {
            return Err(self.budget("nesting", self.limits.depth as u64));
        }
        let Value::Dict(dict) = self.top()? else {
            unreachable!("checked above")
        };
        let dict = Rc::make_mut(dict);
        dict.depth = dict.depth.max(depth + 1);
        let mut it = flat.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            dict.items.push((k, v));
        }
        Ok(())
    }

    fn memo_get(&mut self, id: u32) -> Result<(), PickleError> {
        let v = self
            .memo
            .get(&id)
            .cloned()
            .ok_or_else(|| self.malformed(Malformation::MemoUnset(id)))?;
        self.push(v)
    }

    fn memo_put(&mut self, id: u32) -> Result<(), PickleError> {
        let v = self.top()?.clone();
        self.charge(MEMO_COST)?;
        self.memo.insert(id, v);
        Ok(())
    }

    /// Execute one opcode; `true` at STOP.
    fn step<R: BufRead>(
        &mut self,
        op: u8,
        input: &mut Counted<'_, R>,
    ) -> Result<bool, PickleError> {
        match op {
            // PROTO n
            0x80 => {
                input.u8()?;
            }
            // FRAME (protocol 4): an 8-byte length, then opcodes as usual.
            0x95 => {
                input.exact::<8>()?;
            }
            b'.' => return Ok(true),
            b'(' => {
                if self.stack.len() >= self.limits.stack {
                    return Err(self.budget("stack", self.limits.stack as u64));
                }
                self.stack.push(Slot::Mark);
            }
            // POP, POP_MARK
            b'0' => {
                self.stack
                    .pop()
                    .ok_or_else(|| self.malformed("POP on an empty stack"))?;
            }
            b'1' => {
                self.pop_to_mark()?;
            }
            b'N' => self.push(Value::None)?,
            0x88 => self.push(Value::Bool(true))?,
            0x89 => self.push(Value::Bool(false))?,
            // BININT1, BININT2, BININT
            b'K' => {
                let v = input.u8()?;
                self.push(Value::Int(v.into()))?
            }
            b'M' => {
                let v = u16::from_le_bytes(input.exact()?);
                self.push(Value::Int(v.into()))?
            }
            b'J' => {
                let v = i32::from_le_bytes(input.exact()?);
                self.push(Value::Int(v.into()))?
            }
            // LONG1, LONG4: little-endian two's complement of n bytes; only n ≤ 8 fits.
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    input.u8()? as u32
                } else {
                    u32::from_le_bytes(input.exact()?)
                };
                if n > 8 {
                    return Err(self.malformed(Malformation::IntegerBytes(n)));
                }
                let bytes = input.bytes(n as u64)?;
                let mut buf = [0u8; 8];
                buf[..bytes.len()].copy_from_slice(&bytes);
                if bytes.last().is_some_and(|b| b & 0x80 != 0) {
                    buf[bytes.len()..].fill(0xff);
                }
                self.push(Value::Int(i64::from_le_bytes(buf)))?
            }
            // BINFLOAT: big-endian f64.
            b'G' => {
                let v = f64::from_be_bytes(input.exact()?);
                self.push(Value::Float(v))?
            }
            // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
            0x8c => {
                let len = input.u8()? as u64;
                let v = self.read_string(len, input)?;
                self.push(v)?
            }
            b'X' => {
                let len = u32::from_le_bytes(input.exact()?) as u64;
                let v = self.read_string(len, input)?;
                self.push(v)?
            }
            0x8d => {
                let len = u64::from_le_bytes(input.exact()?);
                let v = self.read_string(len, input)?;
                self.push(v)?
            }
            // GLOBAL "module\nname\n"
            b'c' => {
                let module = input.line(MAX_NAME)?;
                let name = input.line(MAX_NAME)?;
                let global = self.global(module, name)?;
                self.push(global)?
            }
            // STACK_GLOBAL (protocol 4): module and name from the stack.
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Some(module), Some(name)) = (module.as_str(), name.as_str()) else {
                    return Err(self.malformed("STACK_GLOBAL without two strings"));
                };
                let global = self.global(module.as_bytes().to_vec(), name.as_bytes().to_vec())?;
                self.push(global)?
            }
            b')' => {
                let t = self.seq(Vec::new())?;
                self.push(Value::Tuple(t))?
            }
            b't' => {
                let items = self.pop_to_mark()?;
                let t = self.seq(items)?;
                self.push(Value::Tuple(t))?
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.pop()?);
                }
                items.reverse();
                let t = self.seq(items)?;
                self.push(Value::Tuple(t))?
            }
            b']' => {
                let l = self.seq(Vec::new())?;
                self.push(Value::List(l))?
            }
            b'l' => {
                let items = self.pop_to_mark()?;
                let l = self.seq(items)?;
                self.push(Value::List(l))?
            }
            b'a' => {
                let v = self.pop()?;
                self.extend_list(vec![v])?
            }
            b'e' => {
                let items = self.pop_to_mark()?;
                self.extend_list(items)?
            }
            b'}' => {
                self.charge(NODE_COST)?;
                self.push(Value::Dict(Rc::new(Dict {
                    items: Vec::new(),
                    depth: 1,
                })))?
            }
            b'd' => {
                let items = self.pop_to_mark()?;
                self.charge(NODE_COST)?;
                self.push(Value::Dict(Rc::new(Dict {
                    items: Vec::new(),
                    depth: 1,
                })))?;
                self.extend_dict(items)?
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.extend_dict(vec![k, v])?
            }
            b'u' => {
                let items = self.pop_to_mark()?;
                self.extend_dict(items)?
            }
            // REDUCE, NEWOBJ: recorded, never called (OrderedDict() aside).
            b'R' | 0x81 => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let empty_dict =
                    matches!(callable.as_global(), Some(("collections", "OrderedDict")))
                        && args.as_tuple().is_some_and(|a| a.is_empty());
                if empty_dict {
                    self.charge(NODE_COST)?;
                    self.push(Value::Dict(Rc::new(Dict {
                        items: Vec::new(),
                        depth: 1,
                    })))?
                } else {
                    let c = self.call(callable, args)?;
                    self.push(Value::Call(c))?
                }
            }
            // BUILD: state set on a dict (an OrderedDict's `_metadata`) is an attribute, not
            // items; anything else is recorded.
            b'b' => {
                let state = self.pop()?;
                let object = self.pop()?;
                if matches!(object, Value::Dict(_)) {
                    self.push(object)?
                } else {
                    let c = self.call(object, state)?;
                    self.push(Value::Build(c))?
                }
            }
            // BINPERSID
            b'Q' => {
                let pid = self.pop()?;
                let Value::Tuple(t) = pid else {
                    return Err(self.malformed("a persistent id that is not a tuple"));
                };
                self.push(Value::PersistentId(t))?
            }
            // BINGET, LONG_BINGET, BINPUT, LONG_BINPUT, MEMOIZE
            b'h' => {
                let id = input.u8()? as u32;
                self.memo_get(id)?
            }
            b'j' => {
                let id = u32::from_le_bytes(input.exact()?);
                self.memo_get(id)?
            }
            b'q' => {
                let id = input.u8()? as u32;
                self.memo_put(id)?
            }
            b'r' => {
                let id = u32::from_le_bytes(input.exact()?);
                self.memo_put(id)?
            }
            0x94 => {
                let id = self.memo.len() as u32;
                self.memo_put(id)?
            }
            other => {
                return Err(PickleError::Unsupported {
                    op: other,
                    at: self.at,
                })
            }
        }
        Ok(false)
    }

    fn global(&mut self, module: Vec<u8>, name: Vec<u8>) -> Result<Value, PickleError> {
        self.charge(NODE_COST + (module.len() + name.len()) as u64)?;
        let text = |b: Vec<u8>| String::from_utf8(b).ok();
        match (text(module), text(name)) {
            (Some(module), Some(name)) => Ok(Value::Global(Rc::new(Global { module, name }))),
            _ => Err(self.malformed("a global name is not UTF-8")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Value, PickleError> {
        read(
            &mut &bytes[..],
            &mut Budget::new(Limits::for_file(bytes.len() as u64)),
        )
    }

    /// `levels` memo entries, each a tuple of two references to the previous one.
    pub(crate) fn laughs(levels: u8) -> Vec<u8> {
        let mut p = b"\x80\x02]q\x00".to_vec();
        for i in 1..=levels {
            p.extend([b'(', b'h', i - 1, b'h', i - 1, b't', b'q', i]);
        }
        p.push(b'.');
        p
    }

    #[test]
    fn reads_what_python_writes() {
        // pickle.dumps({'a': [1, 300, -5, 2**40, 1.5, None, True], 'b': ('x', ())}, protocol=2)
        let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01M,\x01J\xfb\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01G?\xf8\x00\x00\x00\x00\x00\x00N\x88eX\x01\x00\x00\x00bq\x03X\x01\x00\x00\x00xq\x04)\x86q\x05u.";
        let v = parse(bytes).unwrap();
        let Value::Dict(d) = v else {
            panic!("not a dict")
        };
        assert_eq!(d.items.len(), 2);
        assert_eq!(d.items[0].0.as_str(), Some("a"));
        let Value::List(l) = &d.items[0].1 else {
            panic!("not a list")
        };
        let ints: Vec<Option<i64>> = l.items.iter().map(Value::as_int).collect();
        assert_eq!(
            ints[..4],
            [Some(1), Some(300), Some(-5), Some(1 << 40)],
            "{l:?}"
        );
        assert_eq!(l.items[4], Value::Float(1.5));
        assert_eq!(l.items[5], Value::None);
        assert_eq!(l.items[6], Value::Bool(true));
        let t = d.items[1].1.as_tuple().unwrap();
        assert_eq!(t[0].as_str(), Some("x"));
        assert_eq!(t[1].as_tuple().map(<[Value]>::len), Some(0));
    }

    #[test]
    fn negative_long_and_ordered_dict() {
        // pickle.dumps(collections.OrderedDict(k=-2**40), protocol=2)
        let bytes = b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00kq\x02\x8a\x06\x00\x00\x00\x00\x00\xffs.";
        let Value::Dict(d) = parse(bytes).unwrap() else {
            panic!("OrderedDict() must become a dict")
        };
        assert_eq!(d.items[0].1.as_int(), Some(-(1 << 40)));
    }

    #[test]
    fn reads_protocol_4() {
        // pickle.dumps(collections.OrderedDict([('w', (1.5, [2]))]), protocol=4): FRAME,
        // SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL.
        let bytes = b"\x80\x04\x957\x00\x00\x00\x00\x00\x00\x00\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94\x8c\x01w\x94G?\xf8\x00\x00\x00\x00\x00\x00]\x94K\x02a\x86\x94s.";
        let Value::Dict(d) = parse(bytes).unwrap() else {
            panic!("not a dict")
        };
        assert_eq!(d.items[0].0.as_str(), Some("w"));
        let t = d.items[0].1.as_tuple().unwrap();
        assert_eq!(t[0], Value::Float(1.5));
        let Value::List(l) = &t[1] else { panic!() };
        assert_eq!(l.items, [Value::Int(2)]);
    }

    #[test]
    fn calls_are_records_not_calls() {
        // pickle.dumps(os.system('true')) as an attacker would write it: GLOBAL + REDUCE.
        let bytes = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.";
        let Value::Call(c) = parse(bytes).unwrap() else {
            panic!("not recorded")
        };
        assert_eq!(c.callable.as_global(), Some(("posix", "system")));
        assert_eq!(c.args.as_tuple().unwrap()[0].as_str(), Some("true"));
    }

    #[test]
    fn billion_laughs_shares_instead_of_copying() {
        let bytes = laughs(40);
        assert!(bytes.len() < 400);
        // 2⁴⁰ leaves when expanded; here 40 small tuples.
        let v = parse(&bytes).unwrap();
        assert_eq!(v.depth(), 41);
        // Sharing: both items of the top tuple are the same allocation.
        let Value::Tuple(t) = v else { panic!() };
        let (Value::Tuple(a), Value::Tuple(b)) = (&t.items[0], &t.items[1]) else {
            panic!()
        };
        assert!(Rc::ptr_eq(a, b));
    }

    #[test]
    fn nesting_is_capped() {
        // N, then 100 TUPLE1: a tuple nested 100 deep.
        let mut bytes = b"\x80\x02N".to_vec();
        bytes.extend([0x85; 100]);
        bytes.push(b'.');
        let err = parse(&bytes).unwrap_err();
        assert!(
            matches!(
                err,
                PickleError::Budget {
                    what: "nesting",
                    ..
                }
            ),
            "{err}"
        );
        // 64 levels are fine.
        let mut ok = b"\x80\x02N".to_vec();
        ok.extend([0x85; 64]);
        ok.push(b'.');
        assert_eq!(parse(&ok).unwrap().depth(), 64);
    }

    #[test]
    fn a_flood_stops_at_the_budget() {
        // 1 MB of NONE in batches appended to a list: all of it in containers, none of it on
        // the stack, each byte a value. With a budget of 32 KB it stops after about 2,000
        // values (16 bytes each), having read only that far.
        let mut bytes = b"\x80\x02]".to_vec();
        while bytes.len() < 1 << 20 {
            bytes.push(b'(');
            bytes.extend([b'N'; 999]);
            bytes.push(b'e');
        }
        bytes.push(b'.');
        let limits = Limits {
            memory: 32 << 10,
            ..Limits::for_file(bytes.len() as u64)
        };
        let mut input = &bytes[..];
        let err = read(&mut input, &mut Budget::new(limits)).unwrap_err();
        let PickleError::Budget { what, at, .. } = err else {
            panic!("{err}")
        };
        assert_eq!(what, "memory");
        assert!(at < 5000, "stopped at {at}");
        assert!(input.len() > bytes.len() - 5000, "it read on");

        // On the stack alone (no containers), the stack limit stops it.
        let mut flood = b"\x80\x02".to_vec();
        flood.extend(std::iter::repeat_n(b'N', 3000));
        flood.push(b'.');
        let limits = Limits {
            stack: 1000,
            ..Limits::for_file(flood.len() as u64)
        };
        let err = read(&mut &flood[..], &mut Budget::new(limits)).unwrap_err();
        assert!(
            matches!(err, PickleError::Budget { what: "stack", .. }),
            "{err}"
        );
    }

    #[test]
    fn lengths_are_checked_before_allocating() {
        // BINUNICODE claiming 4 GB, BINUNICODE8 claiming 2⁶³: refused without allocating.
        let err = parse(b"\x80\x02X\xff\xff\xff\xffabc.").unwrap_err();
        assert!(
            matches!(err, PickleError::Budget { what: "memory", .. }),
            "{err}"
        );
        let err = parse(b"\x80\x02\x8d\x00\x00\x00\x00\x00\x00\x00\x80abc.").unwrap_err();
        assert!(
            matches!(err, PickleError::Budget { what: "memory", .. }),
            "{err}"
        );
        // A length within budget but past the end of the data.
        let limits = Limits::for_file(1 << 30);
        let err = read(
            &mut &b"\x80\x02X\x00\x01\x00\x00abc"[..],
            &mut Budget::new(limits),
        )
        .unwrap_err();
        assert!(matches!(err, PickleError::Truncated { .. }), "{err}");
        // A GLOBAL line without an end.
        let mut long = b"\x80\x02c".to_vec();
        long.extend([b'a'; 10_000]);
        let err = read(&mut &long[..], &mut Budget::new(limits)).unwrap_err();
        assert!(matches!(err, PickleError::Truncated { .. }), "{err}");
        // LONG1 of 255 bytes.
        let err = parse(b"\x80\x02\x8a\xff.").unwrap_err();
        assert!(err.to_string().contains("255 bytes"), "{err}");
    }

    #[test]
    fn malformed_pickles_are_errors_not_panics() {
        for bytes in [
            &b""[..],
            b"\x80\x02",
            b"\x80\x02.",
            b"\x80\x02t.",
            b"\x80\x02(.",
            b"\x80\x02Na.",
            b"\x80\x02Ns.",
            b"\x80\x02}N(Nu.",
            b"\x80\x02h\x05.",
            b"\x80\x02q\x00.",
            b"\x80\x02R.",
            b"\x80\x02NQ.",
            b"\x80\x02X\x01\x00\x00\x00\xff.",
            b"\x80\x02I1\n.",
        ] {
            assert!(parse(bytes).is_err(), "{bytes:?}");
        }
        let err = parse(b"\x80\x02I1\n.").unwrap_err();
        assert_eq!(err, PickleError::Unsupported { op: b'I', at: 2 });
    }

    #[test]
    fn shared_lists_are_copied_on_write_and_charged() {
        // l = []; memo[0] = l; l.append(None) → the memo keeps the empty list (values are
        // immutable: a memoised container never changes under another reference).
        let v = parse(b"\x80\x02]q\x00Nah\x00\x86.").unwrap();
        let t = v.as_tuple().unwrap();
        let (Value::List(a), Value::List(b)) = (&t[0], &t[1]) else {
            panic!()
        };
        assert_eq!((a.items.len(), b.items.len()), (1, 0));
    }
}
