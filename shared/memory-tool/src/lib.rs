//! The Claude memory tool (`memory_20250818`, Anthropic's client-side tool: the model issues
//! `view` / `create` / `str_replace` / `insert` / `delete` / `rename` on files under `/memories`
//! and the application runs them against a backend of its choice) backed by one memoryRef of
//! wop-memory: CTI-1 on the ref, SR-1 on every write, forget by subject, no lost update between
//! racing edits (docs/api.md "The Claude memory tool").

pub mod command;
pub mod forget;
pub mod http;
pub mod path;
pub mod tool;

pub use command::Command;
pub use forget::PathForgetHook;
pub use tool::{Call, MemoryTool, ToolResult};
