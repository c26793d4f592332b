//! reqcost analysis stage.
