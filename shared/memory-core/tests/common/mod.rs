//! The world the core's integration tests run in: the in-memory ports at one fixed instant, the
//! services over them, and puts read from JSON the way the wire reads them.

// Each test binary takes the part of the world it needs.
#![allow(dead_code)]

use memory_core::forget::Forgetter;
use memory_core::reader::MemoryReader;
use memory_core::writer::{MemoryWriter, PutOutput, PutRequest};
use memory_core::CoreError;
use memory_testkit::in_memory::TestPorts;
use serde_json::Value;

pub const NOW: i64 = 1_800_000_000_000;

pub struct World {
    pub ports: TestPorts,
    pub writer: MemoryWriter,
    pub reader: MemoryReader,
    pub forgetter: Forgetter,
}

pub fn world() -> World {
    let ports = TestPorts::at(NOW);
    World {
        writer: ports.writer(),
        reader: MemoryReader::new(ports.store.clone(), ports.clock.clone()),
        forgetter: Forgetter::new(ports.core()),
        ports,
    }
}

pub fn request(v: Value) -> PutRequest {
    serde_json::from_value(v).expect("valid request shape")
}

impl World {
    /// The writer's `put` of a request given as its JSON body.
    pub async fn put(&self, body: Value) -> Result<PutOutput, CoreError> {
        self.writer.put(&request(body)).await
    }
}
