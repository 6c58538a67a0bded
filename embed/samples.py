"""Built-in sample texts in several languages: export verification and quick self-checks."""

from __future__ import annotations

_LONG = (
    "The Raspberry Pi 5 pairs a quad-core Cortex-A76 processor with a PCIe 2.0 lane, which the "
    "AI HAT+ uses to reach its neural accelerator. Sentence encoders split a text into word "
    "pieces, add position information, and run a stack of attention layers over them; the mean "
    "of the last layer, normalised to unit length, is the embedding that semantic search "
    "compares. Long documents are therefore cut into chunks that fit the encoder's window, and "
    "each chunk is embedded on its own. "
)

VERIFY_TEXTS: list[str] = [
    "Where is the nearest train station?",
    "Wo ist der nächste Bahnhof?",
    "¿Dónde está la estación de tren más cercana?",
    "Où se trouve la gare la plus proche ?",
    "Dov'è la stazione ferroviaria più vicina?",
    "Onde fica a estação de trem mais próxima?",
    "Waar is het dichtstbijzijnde treinstation?",
    "Gdzie jest najbliższa stacja kolejowa?",
    "Где находится ближайший вокзал?",
    "最寄りの駅はどこですか？",
    "最近的火车站在哪里？",
    "가장 가까운 기차역이 어디에 있나요?",
    "Nerede en yakın tren istasyonu var?",
    "أين أقرب محطة قطار؟",
    "निकटतम रेलवे स्टेशन कहाँ है?",
    "Invoice 2024-117: payment due within 30 days, bank transfer only.",
    "Rechnung 2024-117: Zahlung innerhalb von 30 Tagen, nur per Überweisung.",
    "The quarterly report shows revenue up 12% year over year.",
    "Le rapport trimestriel montre une hausse du chiffre d'affaires de 12 %.",
    "How do I reset my router to factory settings?",
    "Cómo restablecer el router a la configuración de fábrica",
    "sudo apt install hailo-h10-all && hailortcli fw-control identify",
    "def mean_pool(hidden, mask): return (hidden * mask).sum(1) / mask.sum(1)",
    "I love this! 😍🎉 Best day ever!!!",
    "???!!! ... --- ***",
    "a",
    "OK",
    "Die Katze schläft auf dem Sofa.",
    "The cat is sleeping on the sofa.",
    "Кошка спит на диване.",
    "猫がソファで寝ています。",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "La fotosíntesis convierte la energía luminosa en energía química.",
    "Meeting moved to Thursday 3pm, room B2.",
    _LONG * 6,
    ("Ein sehr langer deutscher Text über Dokumentensuche und Vektorräume. " * 40).strip(),
]
