//! The top layer of `model/`: one file per family (or per checkpoint layout several families
//! share, as BART's), each a table of its tensor names, its config with transformers' defaults,
//! its quirks as [`Family`](crate::blocks::family::Family) data, and the blocks it builds
//! its network from; and [`registry`], the one list of them. A family file imports blocks and
//! formats, never another family file, and nothing outside this folder names a family.

pub mod albert;
pub mod bart;
pub mod bert;
pub mod clip;
pub mod deepseek;
pub mod dinov2;
pub mod distilbert;
pub mod electra;
pub mod gemma;
pub mod gemma3_vision;
pub mod gpt2;
pub mod gpt_oss;
pub mod idefics3;
pub mod llama;
pub mod llava;
pub mod mmproj;
pub mod paligemma;
pub mod phi3;
pub mod qwen2_5_vl;
pub mod qwen3_5;
pub mod qwen3_next;
pub mod registry;
pub mod roberta;
pub mod siglip;
pub mod t5;
pub mod vit;
pub mod whisper;
