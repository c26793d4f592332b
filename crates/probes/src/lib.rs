mod skel {
    include!(concat!(env!("OUT_DIR"), "/reqcost.skel.rs"));
}
