use super::*;

const GPU: ResourceId = ResourceId(0);
const CPU: ResourceId = ResourceId(1);
/// A device resource in milli-GPUs.
const MILLI: ResourceId = ResourceId(2);

fn pool(nodes: u32) -> PoolSpec {
    PoolSpec {
        flavor: FlavorId(0),
        nodes,
        allocatable: vec![(GPU, Amount::from_units(8)), (CPU, Amount::from_units(96))],
        min_nodes: 0,
        max_nodes: 4,
        devices: Vec::new(),
        names: Vec::new(),
    }
}

/// `nodes` nodes of `cards` cards of 1000 gpu-milli and 64 CPUs.
fn shared_pool(nodes: u32, cards: u16) -> PoolSpec {
    PoolSpec {
        flavor: FlavorId(0),
        nodes,
        allocatable: vec![
            (CPU, Amount::from_units(64)),
            (MILLI, Amount::from_units(1000 * cards as i64)),
        ],
        min_nodes: nodes,
        max_nodes: nodes,
        devices: vec![DeviceSpec {
            resource: MILLI,
            cards,
            per_card: Amount::from_units(1000),
        }],
        names: Vec::new(),
    }
}

fn milli(m: i64) -> Vec<(ResourceId, Amount)> {
    vec![(CPU, Amount::from_units(1)), (MILLI, Amount::from_units(m))]
}

fn place_one(capacity: &Capacity, per_pod: &[(ResourceId, Amount)]) -> Option<Vec<Placement>> {
    capacity.place(
        &mut Scratch::default(),
        0,
        &[FlavorId(0)],
        1,
        per_pod,
        &mut By::BestFit,
    )
}

/// One pod placed by `scorer`'s scores, ties ordered by `salt`.
fn place_scored(
    capacity: &Capacity,
    scorer: &mut dyn Scorer,
    salt: u64,
    per_pod: &[(ResourceId, Amount)],
) -> Option<Vec<Placement>> {
    capacity.place(
        &mut Scratch::default(),
        0,
        &[FlavorId(0)],
        1,
        per_pod,
        &mut By::Score { scorer, salt },
    )
}

#[test]
fn every_pod_needs_one_node() {
    let capacity = Capacity::new(1, 2, &[pool(2)]);
    // 2 nodes × 8 GPUs = 16, but a 12-GPU pod fits on neither.
    assert!(place_one(&capacity, &[(GPU, Amount::from_units(12))]).is_none());
    let placed = capacity
        .place(
            &mut Scratch::default(),
            0,
            &[FlavorId(0)],
            4,
            &[(GPU, Amount::from_units(4))],
            &mut By::BestFit,
        )
        .unwrap();
    assert_eq!(placed.iter().map(|p| p.pods).sum::<u32>(), 4);
}

#[test]
fn best_fit_packs_before_spreading() {
    let mut capacity = Capacity::new(1, 2, &[pool(2)]);
    let first = place_one(&capacity, &[(GPU, Amount::from_units(2))]).unwrap();
    capacity.commit(&first);
    let second = place_one(&capacity, &[(GPU, Amount::from_units(2))]).unwrap();
    assert_eq!(
        first[0].node, second[0].node,
        "second pod goes to the fuller node"
    );
    capacity.commit(&second);
    // An 8-GPU pod still fits: the other node stayed empty.
    assert!(place_one(&capacity, &[(GPU, Amount::from_units(8))]).is_some());
    capacity.release(&first);
    capacity.release(&second);
    assert_eq!(
        capacity.usage(FlavorId(0), GPU),
        Some((Amount::ZERO, Amount::from_units(16)))
    );
}

#[test]
fn scaling_respects_pool_bounds() {
    let mut capacity = Capacity::new(1, 2, &[pool(1)]);
    assert!(capacity.add_node(FlavorId(0)));
    assert!(capacity.add_node(FlavorId(0)));
    assert!(capacity.add_node(FlavorId(0)));
    assert!(!capacity.add_node(FlavorId(0)), "max 4 nodes");
    assert_eq!(capacity.ready_nodes(FlavorId(0)), 4);
    assert!(capacity.remove_idle_node(FlavorId(0)));
    assert_eq!(capacity.ready_nodes(FlavorId(0)), 3);
}

#[test]
fn a_share_needs_one_card_with_room() {
    // One node, two cards; 0.7 on each leaves 0.6 free on the node as
    // 0.3 + 0.3, and no card holds a 0.5 share.
    let mut capacity = Capacity::new(1, 3, &[shared_pool(1, 2)]);
    for _ in 0..2 {
        let p = place_one(&capacity, &milli(700)).unwrap();
        capacity.commit(&p);
    }
    assert_eq!(
        capacity.node_cards(FlavorId(0), 0).unwrap(),
        &[Amount::from_units(300), Amount::from_units(300)],
        "the second 0.7 went to the other card"
    );
    assert!(place_one(&capacity, &milli(500)).is_none());
    assert!(place_one(&capacity, &milli(300)).is_some());
}

#[test]
fn whole_cards_need_fully_free_cards() {
    let mut capacity = Capacity::new(1, 3, &[shared_pool(1, 4)]);
    // Two half shares: best fit puts both on card 0, leaving 3 free cards.
    for _ in 0..2 {
        let p = place_one(&capacity, &milli(500)).unwrap();
        capacity.commit(&p);
    }
    let three = place_one(&capacity, &milli(3000)).unwrap();
    assert_eq!(
        three[0].cards.iter().map(|u| u.card).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    capacity.commit(&three);
    assert!(
        place_one(&capacity, &milli(1000)).is_none(),
        "no card is free"
    );
    // 1.5 cards is neither a share nor whole cards: never on any node.
    assert_eq!(
        capacity.pods_could_ever_fit(FlavorId(0), &milli(1500)),
        0,
        "1.5 cards never fit"
    );
    assert_eq!(capacity.pods_could_ever_fit(FlavorId(0), &milli(300)), 12);
    assert_eq!(capacity.pods_could_ever_fit(FlavorId(0), &milli(2000)), 2);
    capacity.release(&three);
    assert_eq!(
        capacity.node_cards(FlavorId(0), 0).unwrap(),
        &[
            Amount::ZERO,
            Amount::from_units(1000),
            Amount::from_units(1000),
            Amount::from_units(1000)
        ]
    );
}

#[test]
fn has_room_checks_cards() {
    let mut capacity = Capacity::new(1, 3, &[shared_pool(1, 2)]);
    let p = place_one(&capacity, &milli(600)).unwrap();
    assert!(capacity.has_room(&p));
    capacity.commit(&p);
    // The same card again: the node has 1.4 free, the card only 0.4.
    assert!(!capacity.has_room(&p));
}

struct Prefer(u32, Option<u16>);

impl Scorer for Prefer {
    fn score(
        &mut self,
        _: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>> {
        Some(
            candidates
                .iter()
                .map(|c| NodeScore {
                    score: if c.node == self.0 { 1.0 } else { 0.0 },
                    card: self.1,
                })
                .collect(),
        )
    }
}

#[test]
fn a_scorer_picks_node_and_card() {
    let capacity = Capacity::new(1, 3, &[shared_pool(3, 4)]);
    let mut scorer = Prefer(2, Some(3));
    let placed = place_scored(&capacity, &mut scorer, 7, &milli(250)).unwrap();
    assert_eq!(placed[0].node, 2);
    assert_eq!(placed[0].cards[0].card, 3);
    // A card that cannot hold the pod is replaced by the fullest that can.
    let mut scorer = Prefer(1, Some(9));
    let placed = place_scored(&capacity, &mut scorer, 7, &milli(250)).unwrap();
    assert_eq!((placed[0].node, placed[0].cards[0].card), (1, 0));
}

struct Flat;

impl Scorer for Flat {
    fn score(
        &mut self,
        _: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>> {
        Some(vec![
            NodeScore {
                score: 5.0,
                card: None
            };
            candidates.len()
        ])
    }
}

#[test]
fn equal_scores_follow_a_fixed_order_drawn_from_the_salt() {
    let mut capacity = Capacity::new(1, 3, &[shared_pool(16, 4)]);
    let place =
        |capacity: &Capacity, salt| place_scored(capacity, &mut Flat, salt, &milli(100)).unwrap();
    let firsts: std::collections::BTreeSet<u32> =
        (0..64).map(|salt| place(&capacity, salt)[0].node).collect();
    assert!(
        firsts.len() > 4,
        "salts order the nodes differently: {firsts:?}"
    );
    // One salt: the same node again while it has room (ties pack).
    let first = place(&capacity, 11);
    capacity.commit(&first);
    assert_eq!(place(&capacity, 11)[0].node, first[0].node);
}
