"""The conformance corpus: texts that real tokenizers and models must treat
exactly as the Hugging Face libraries do.

TEXTS holds at least 200 entries built from the hand-written lists below
(several languages and scripts, emoji and ZWJ sequences, whitespace runs,
control characters, very short inputs, numbers and code) plus derived ones:
each sentence with doubled spaces, tabs and newlines, and long texts that
run past every model's max_seq_length (so truncation is exercised).

PARAPHRASES are pairs with the same meaning in different words and
UNRELATED pairs of sentences on different topics; the quality checks ask a
model to score every paraphrase pair above every unrelated pair.
"""

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the stage.",
    "The stock market fell sharply after the announcement.",
    "She bought fresh bread and cheese at the farmers' market.",
    "Photosynthesis converts light energy into chemical energy.",
    "The train to Berlin leaves at 7:45 from platform 3.",
    "Please reset your password using the link below.",
    "How do I bake sourdough bread without a starter?",
    "The committee approved the budget by a narrow margin.",
    "Rainfall this autumn was twice the seasonal average.",
    "Quantum computers use qubits instead of classical bits.",
    "The museum reopened after a two-year renovation.",
    "He forgot his umbrella and got soaked on the way home.",
    "Children were playing football in the park until sunset.",
    "The new phone has a larger battery and a brighter screen.",
    "Our flight was delayed because of fog at the airport.",
    "Regular exercise lowers the risk of heart disease.",
    "The recipe calls for two cups of flour and one egg.",
    "Volcanic ash grounded flights across northern Europe.",
    "The library extends its opening hours during exams.",
    "Der Zug nach München hat zwanzig Minuten Verspätung.",
    "Ich habe gestern ein sehr spannendes Buch gelesen.",
    "Le chat dort sur le canapé depuis ce matin.",
    "Nous avons visité le musée du Louvre pendant les vacances.",
    "El perro corre feliz por la playa al amanecer.",
    "¿Dónde está la estación de tren más cercana?",
    "O gato está dormindo no sofá da sala.",
    "La pizza napoletana è patrimonio dell'UNESCO.",
    "De fiets staat achter het huis in de schuur.",
    "Kot śpi na parapecie w słońcu.",
    "Кошка спит на диване весь день.",
    "Москва — столица России, крупнейший город страны.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "Kedi bütün gün kanepede uyudu.",
    "東京は日本の首都です。",
    "今日はとても良い天気ですね。",
    "我喜欢在周末去公园散步。",
    "北京是中华人民共和国的首都。",
    "서울은 대한민국의 수도입니다.",
    "오늘 날씨가 정말 좋네요.",
    "مرحبا بكم في مدينة القاهرة.",
    "הספרייה נפתחת בשעה שמונה בבוקר.",
    "नमस्ते, आप कैसे हैं?",
    "ভাত আর মাছ বাঙালির প্রিয় খাবার।",
    "ขอบคุณมากครับ",
    "Tôi thích uống cà phê sữa đá vào buổi sáng.",
    "Habari za asubuhi, rafiki yangu.",
    "Mäusebär, Öl, Übermaß und Straße.",
    "naïve café résumé coöperate façade",
    "Ångström unit, Æsir, Øresund, Þórr.",
    "ﬁnancial ﬂoor ligatures and ＦＵＬＬＷＩＤＴＨ letters",
    "e\u0301 composed differently from \u00e9",
    "I love pizza 🍕 and sushi 🍣!",
    "Family: 👨‍👩‍👧‍👦 and flags 🇩🇪 🇯🇵 🏳️‍🌈",
    "Thumbs up 👍🏽 skin tones 👋🏿 work too.",
    "✨🚀🔥💯",
    "Math: ∑_{i=1}^{n} x_i ≤ √(n·∑x_i²) ∀ n ∈ ℕ",
    "Prices: $19.99, €5, £3.50, ¥1000, ₹250",
    "Call +1 (555) 010-2030 or write to help@example.com",
    "Visit https://example.com/path?query=1&lang=en#top now",
    "def add(a, b):\n    return a + b  # sum",
    "SELECT name, COUNT(*) FROM users GROUP BY name;",
    "{\"key\": [1, 2, 3], \"nested\": {\"ok\": true}}",
    "<p class=\"note\">Hello <b>world</b></p>",
    "2024-03-15T10:30:00Z 3.14159 1e-10 0xFF 1,234,567",
    "ALL CAPS SENTENCE WITH SHOUTING!!!",
    "mIxEd CaSe TeXt LoOkS wEiRd",
    "don't can't won't it's we're they'll I'd",
    "state-of-the-art, well-known, e-mail, co-operate",
    "Dr. Smith arrived at 5 p.m. on Jan. 3rd, i.e. yesterday.",
    "Wait... what?! Really?? No way!!!",
    "(nested (parentheses [and {braces}]))",
    "tab\tseparated\tvalues\there",
    "line one\nline two\r\nline three",
    "unbelievably antidisestablishmentarianism pneumonoultramicroscopic",
    "supercalifragilisticexpialidocious" * 3,
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
    "[CLS] [SEP] [MASK] [PAD] [UNK] <s> </s> <pad> <mask>",
    "zero\u200bwidth\u200cjoiners\u200dhere",
    "soft\u00adhyphen and non\u00a0breaking space",
    "control\u0007chars\u001bhere",
    "right-to-left: \u202eabc\u202c mark",
]

SHORT = ["a", "I", "ok", "Hi", "?", "!", ".", "42", "é", "日", "🙂", "x y",
         "No.", "yes", "ß", "İ", "ǅ", "-", "'", "..."]

WHITESPACE = ["", " ", "   ", "\t", "\n", " \n \t ", "  leading spaces",
              "trailing spaces   ", "many     spaces     between",
              "\n\nblank lines\n\n"]

PARAPHRASES = [
    ("A man is playing a guitar.", "Someone is playing the guitar."),
    ("The cat is sleeping on the sofa.", "A cat naps on the couch."),
    ("How can I reset my password?",
     "What are the steps to change my password?"),
    ("The weather is very cold today.", "It is freezing outside today."),
    ("She is reading a book in the library.",
     "A woman reads a book at the library."),
    ("The company reported record profits this year.",
     "This year the firm earned more than ever before."),
    ("Children are playing in the park.", "Kids play at the park."),
    ("The flight was cancelled due to bad weather.",
     "Bad weather caused the flight to be cancelled."),
    ("He drives to work every morning.", "Every morning he goes to work by car."),
    ("The restaurant serves excellent Italian food.",
     "That restaurant has great Italian cuisine."),
    ("Water boils at 100 degrees Celsius.",
     "At 100 °C, water starts to boil."),
    ("The meeting has been moved to Friday.",
     "We rescheduled the meeting for Friday."),
    ("A dog is running across the field.", "A dog runs through a meadow."),
    ("I need to buy groceries after work.",
     "After work I have to go grocery shopping."),
    ("The movie was long and boring.", "The film was tedious and far too long."),
    ("Scientists discovered a new species of frog.",
     "Researchers found a previously unknown frog species."),
]

UNRELATED = [
    ("A man is playing a guitar.", "The stock market fell sharply today."),
    ("The cat is sleeping on the sofa.",
     "Quantum computers use qubits instead of bits."),
    ("How can I reset my password?", "Volcanic ash covered the village."),
    ("The weather is very cold today.", "She bought a new laptop for coding."),
    ("Children are playing in the park.",
     "The committee approved the annual budget."),
    ("Water boils at 100 degrees Celsius.",
     "The novel was translated into twelve languages."),
    ("A dog is running across the field.",
     "Interest rates will rise next quarter."),
    ("The movie was long and boring.",
     "Photosynthesis converts light into chemical energy."),
]

_LONG_BASE = (
    "Transformers process sequences of tokens with attention, and the way "
    "they encode position decides what they can learn about order. ")


def _long_texts():
    out = []
    for repeats in (20, 45, 90):
        out.append(_LONG_BASE * repeats)
    out.append(" ".join(SENTENCES[:40]))
    out.append(" ".join(SENTENCES[20:60]) * 3)
    out.append("日本語の長い文章です。" * 120)
    out.append("🙂" * 600)
    out.append("word " * 1200)
    return out


def _variants():
    out = []
    for s in SENTENCES[:40]:
        out.append(s.replace(" ", "  "))
    for s in SENTENCES[40:60]:
        out.append("\t" + s.replace(" ", " \n ") + "   ")
    for s in SENTENCES[:20]:
        out.append(s.lower())
    for s in SENTENCES[:10]:
        out.append(s.upper())
    return out


def _pair_texts():
    out = []
    for a, b in PARAPHRASES + UNRELATED:
        out.extend([a, b])
    return out


def build():
    seen, texts = set(), []
    for t in (SENTENCES + SHORT + WHITESPACE + _pair_texts() + _variants() +
              _long_texts()):
        if t not in seen:
            seen.add(t)
            texts.append(t)
    return texts


TEXTS = build()
assert len(TEXTS) >= 200, len(TEXTS)
# The texts the server embeds: it refuses empty text (docs/models.md,
# "What is compared").
NONEMPTY = [t for t in TEXTS if t]

if __name__ == "__main__":
    print(len(TEXTS))
