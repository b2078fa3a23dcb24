//! Word lists the coupling step reads: which tokens change what a sentence asserts (negation,
//! modality, hedges, conditions, attribution) and which are only grammar. Lowercase, matched on
//! whole tokens after apostrophe normalisation. Leaving a word *out* of a cue list can only make
//! coupling more permissive; adding one can only make it stricter.

/// Grammatical glue that may differ between claim and source: articles and present forms of
/// "to be". Deliberately tiny: tense (`was`, `were`) and modality are content.
pub const GLUE: &[&str] = &["a", "am", "an", "are", "be", "is", "the"];

/// Negation and its near relatives, in scope for the clause they stand in.
pub const NEGATION: &[&str] = &[
    "absent", "barely", "zero", "cannot", "ceased", "fail", "failed", "failing", "fails", "hardly", "lack", "lacked", "lacking", "lacks",
    "neither", "never", "no", "nobody", "none", "nope", "nor", "not", "nothing", "nowhere", "rarely", "refused", "refuses", "scarcely",
    "seldom", "unable", "without", // contractions written without an apostrophe
    "aint", "arent", "cant", "couldnt", "didnt", "doesnt", "dont", "hadnt", "hasnt", "havent", "isnt", "mightnt", "mustnt", "neednt",
    "shant", "shouldnt", "wasnt", "werent", "wont", "wouldnt", "darent", "oughtnt",
];

/// Modality, tense, disjunction and quantity: in scope for their clause. A claim that drops one
/// of these from the clause it quotes says something the source does not.
pub const CLAUSE_CUES: &[&str] = &[
    "almost",
    "anymore",
    "can",
    "could",
    "either",
    "few",
    "formerly",
    "had",
    "half",
    "initially",
    "many",
    "may",
    "might",
    "minority",
    "most",
    "must",
    "nearly",
    "or",
    "originally",
    "ought",
    "part",
    "partially",
    "partly",
    "previously",
    "several",
    "shall",
    "should",
    "some",
    "until",
    "was",
    "were",
    "will",
    "would",
];

/// Markers that make a part of a sentence (up to `;`, `:`, a dash or ", and"/", but") something
/// other than a plain assertion: conditions, attribution, belief, hedges.
pub const SENTENCE_MARKERS: &[&str] = &[
    "announced",
    "concluded",
    "confirmed",
    "insist",
    "insists",
    "mentioned",
    "once",
    "per",
    "promised",
    "stated",
    "states",
    "told",
    "when",
    "wrote",
    "writes",
    "assumes",
    "according",
    "alleged",
    "allegedly",
    "apparently",
    "appear",
    "appeared",
    "appears",
    "argued",
    "argues",
    "arguably",
    "hypothesise",
    "hypothesised",
    "hypothesises",
    "hypothesize",
    "hypothesizes",
    "posit",
    "posited",
    "posits",
    "ideally",
    "hopefully",
    "hinted",
    "hints",
    "implied",
    "implies",
    "insinuated",
    "speculate",
    "speculates",
    "conjecture",
    "conjectured",
    "assume",
    "assumed",
    "assuming",
    "belief",
    "believe",
    "believed",
    "believes",
    "claim",
    "claimed",
    "claims",
    "contrary",
    "debunked",
    "denied",
    "denies",
    "deny",
    "disputed",
    "doubt",
    "doubted",
    "doubtful",
    "doubts",
    "erroneously",
    "expect",
    "expected",
    "expects",
    "false",
    "fear",
    "feared",
    "fears",
    "felt",
    "generally",
    "guess",
    "guessed",
    "heard",
    "hope",
    "hoped",
    "hopes",
    "hypothesis",
    "hypothesized",
    "hypothetically",
    "if",
    "imagine",
    "incorrect",
    "insisted",
    "intend",
    "intended",
    "intends",
    "likely",
    "maybe",
    "misconception",
    "mistaken",
    "mistakenly",
    "mostly",
    "myth",
    "myths",
    "occasionally",
    "often",
    "perhaps",
    "planned",
    "plans",
    "possibly",
    "predicted",
    "predicts",
    "presumably",
    "pretend",
    "probably",
    "proposed",
    "proposes",
    "provided",
    "reported",
    "reportedly",
    "reports",
    "retracted",
    "rumor",
    "rumored",
    "rumors",
    "rumour",
    "rumoured",
    "said",
    "say",
    "says",
    "seem",
    "seemed",
    "seemingly",
    "seems",
    "sometimes",
    "speculated",
    "suggest",
    "suggested",
    "suggests",
    "suppose",
    "supposedly",
    "supposing",
    "suspect",
    "suspected",
    "suspects",
    "think",
    "thinks",
    "thought",
    "typically",
    "unclear",
    "unconfirmed",
    "unless",
    "unlikely",
    "untrue",
    "unverified",
    "usually",
    "whenever",
    "whether",
    "wish",
    "wished",
    "wonder",
    "wondered",
    "wrong",
    "wrongly",
];

/// Words that, right before the quoted run, put it in contrast ("instead of B", "rather than B").
pub const CONTRAST: &[&str] = &["apart", "besides", "except", "excluding", "instead", "rather", "than", "unlike", "versus", "vs"];

/// Words right after the quoted run that carve an exception out of it ("daily except Mondays").
pub const EXCEPTIONS: &[&str] = &["apart", "barring", "besides", "except", "excepting", "excluding", "save"];

/// Words before "but" that make it mean "except" ("everything but the yoghurt").
pub const UNIVERSALS: &[&str] =
    &["all", "anybody", "anyone", "anything", "everybody", "everyone", "everything", "nobody", "none", "nothing"];

/// Verbs that reverse an earlier statement, wherever they stand in the next sentence.
pub const REVERSALS: &[&str] = &[
    "cancelled",
    "canceled",
    "debunked",
    "disproved",
    "disproven",
    "overturned",
    "rescinded",
    "retracted",
    "revoked",
    "withdrawn",
    "withdrew",
];

/// Words that qualify a number right after them ("more than 10", "up to 5", "about 3").
pub const COMPARATORS: &[&str] = &[
    "above",
    "about",
    "almost",
    "approx",
    "approximately",
    "around",
    "at",
    "below",
    "beyond",
    "exceed",
    "exceeded",
    "exceeds",
    "fewer",
    "greater",
    "less",
    "least",
    "max",
    "maximum",
    "min",
    "minimum",
    "more",
    "most",
    "nearly",
    "over",
    "roughly",
    "than",
    "to",
    "under",
    "up",
    "upto",
    "within",
];

/// Comparatives right after a quantity: the source compares it ("£6 a month more than …").
pub const COMPARATIVES: &[&str] = &[
    "more", "less", "fewer", "higher", "lower", "cheaper", "pricier", "dearer", "faster", "slower", "longer", "shorter", "bigger",
    "smaller", "larger", "better", "worse", "extra", "than", "above", "below", "over", "under", "up", "down", "off", "later", "earlier",
    "heavier", "lighter", "warmer", "colder", "hotter", "cooler", "greater", "louder", "quieter", "wider", "narrower",
];

/// Words after a number that do not qualify it: the number's clause goes on.
pub const AFTER_NUMBER_OK: &[&str] = &[
    "after", "and", "as", "at", "because", "before", "but", "by", "during", "for", "from", "in", "instead", "on", "rather", "since", "so",
    "that", "then", "when", "where", "which", "while", "with",
];

/// Words that open a new clause for cue scoping ("X, but Y did not fire" keeps "not" with Y).
pub const COORDINATORS: &[&str] = &["although", "and", "because", "but", "however", "though", "whereas", "while", "yet"];

/// Words that say an earlier statement is false or outdated.
pub const FALSITY: &[&str] = &[
    "debunked",
    "disproved",
    "disproven",
    "false",
    "inaccurate",
    "incorrect",
    "misconception",
    "mistaken",
    "myth",
    "obsolete",
    "outdated",
    "premature",
    "retracted",
    "ruled",
    "superseded",
    "thought",
    "untrue",
    "withdrawn",
    "wrong",
];

/// Words that point back at what was just said.
pub const ANAPHORS: &[&str] = &["it", "that", "these", "this", "those", "which"];

/// Coordinators that, after a comma, open a new part of a sentence.
pub const PART_OPENERS: &[&str] = &["and", "so", "which", "while", "yet"];

/// Coordinators that open a new part with or without a comma.
pub const STRONG_COORDINATORS: &[&str] = &["although", "but", "however", "though", "whereas"];

/// Words a bare retraction ("It is not.", "but it isn't", "not really") is made of, besides its
/// negation or falsity word.
pub const RETRACTION_FILLER: &[&str] = &[
    "actually", "all", "any", "anymore", "at", "been", "case", "did", "do", "does", "even", "exactly", "has", "have", "i", "it", "longer",
    "more", "now", "or", "out", "quite", "really", "so", "that", "these", "they", "this", "those", "though", "to", "true", "turned", "we",
    "which", "yet",
];

/// Words a following sentence opens with when it takes back the one before.
pub const RETRACTION_OPENERS: &[&str] = &[
    "actually",
    "correction",
    "edit",
    "erratum",
    "false",
    "nope",
    "retracted",
    "retraction",
    "scratch",
    "superseded",
    "turns",
    "update",
    "wrong",
];

/// A negation cue. Tokens reach here without apostrophes, so every `n't` contraction is one of
/// the apostrophe-less forms listed.
pub fn is_negation(t: &str) -> bool {
    NEGATION.contains(&t)
}

/// Auxiliaries that, opening a sentence, make it a condition or a question ("Should X fail, …").
pub const INVERTED_OPENERS: &[&str] = &["could", "did", "do", "does", "had", "might", "should", "were", "would"];
