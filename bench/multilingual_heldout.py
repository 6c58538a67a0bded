"""A labelled multilingual set written for the NPU-default bench (bench/npu_default.py), held out
from every fit and choice made with the other sets: 30 short documents in 11 languages on
everyday topics, several topics present twice in different languages with different facts
(hard negatives across languages), and 45 queries: 30 cross-lingual (the query's language is
not its document's), 15 same-language. Each query has one relevant document.
"""

from __future__ import annotations

#: name -> (language, text)
DOCS = {
    "de-heizung": ("de", "Die Heizung in der Wohnung fällt jeden Morgen aus. Der Vermieter hat für Donnerstag "
                         "einen Techniker bestellt, der den Brenner austauschen soll."),
    "de-kita": ("de", "Die Anmeldung für den Kindergarten muss bis Ende März beim Jugendamt eingehen. "
                      "Bitte legen Sie den Impfpass und eine Meldebescheinigung bei."),
    "de-fahrrad": ("de", "Mein Fahrrad wurde vor dem Bahnhof gestohlen, obwohl es abgeschlossen war. "
                         "Die Polizei hat eine Anzeige aufgenommen; die Versicherung verlangt die Rechnung."),
    "fr-vaccin": ("fr", "La pharmacie propose le vaccin contre la grippe sans rendez-vous le mardi et le "
                        "jeudi. Apportez votre carte vitale et l'ordonnance du médecin."),
    "fr-demenagement": ("fr", "Nous déménageons à Lyon le 15 juin. Le camion de location doit être rendu "
                              "le lendemain avant midi avec le plein d'essence."),
    "fr-fuite": ("fr", "Une fuite d'eau sous l'évier a abîmé le parquet de la cuisine. Le plombier "
                       "viendra lundi et l'assurance habitation prendra en charge les dégâts."),
    "es-pasaporte": ("es", "Para renovar el pasaporte hay que pedir cita previa en la comisaría y llevar "
                           "una fotografía reciente y el pasaporte caducado."),
    "es-paella": ("es", "Para la paella, sofríe el pollo y el conejo, añade el tomate rallado y el "
                        "pimentón, y después el arroz con el caldo y el azafrán."),
    "es-alquiler": ("es", "El contrato de alquiler se renueva automáticamente cada año, salvo que el "
                          "inquilino avise con dos meses de antelación por escrito."),
    "it-multa": ("it", "Ho ricevuto una multa per eccesso di velocità in autostrada. Se la pago entro "
                       "cinque giorni ho diritto a uno sconto del trenta per cento."),
    "it-treno": ("it", "Il treno regionale per Firenze è stato cancellato per uno sciopero. I biglietti "
                       "possono essere rimborsati in biglietteria entro sette giorni."),
    "it-olio": ("it", "L'olio extravergine si conserva al buio e lontano dai fornelli; dopo l'apertura "
                      "va consumato entro tre mesi perché perde profumo."),
    "pt-dentista": ("pt", "A consulta no dentista foi adiada para sexta-feira às dez horas. É preciso "
                          "levar o cartão do seguro e chegar quinze minutos mais cedo."),
    "pt-horta": ("pt", "Na horta, as alfaces precisam de rega todas as manhãs no verão, e os tomateiros "
                       "devem ser amarrados a uma cana quando crescem."),
    "pt-banco": ("pt", "O banco bloqueou o cartão de crédito depois de uma compra suspeita no estrangeiro. "
                       "Para o desbloquear é preciso ligar para a linha de apoio."),
    "nl-fiets": ("nl", "De fietsenmaker repareert lekke banden binnen een uur, maar voor een nieuwe "
                       "versnelling moet je de fiets een dag achterlaten."),
    "nl-belasting": ("nl", "De belastingaangifte over vorig jaar moet voor 1 mei bij de Belastingdienst "
                           "binnen zijn; wie uitstel wil, moet dat vooraf aanvragen."),
    "nl-hond": ("nl", "Onze hond moet twee keer per dag uitgelaten worden en mag in het park alleen "
                      "aan de lijn, behalve op het hondenveld."),
    "pl-pociag": ("pl", "Pociąg do Krakowa odjeżdża z peronu trzeciego o siódmej rano. Bilety można "
                        "kupić w automacie albo przez aplikację."),
    "pl-lekarz": ("pl", "Na wizytę u lekarza rodzinnego trzeba się zapisać telefonicznie. W nagłych "
                        "przypadkach przychodnia przyjmuje bez rejestracji."),
    "pl-remont": ("pl", "Remont łazienki potrwa trzy tygodnie. Najpierw hydraulik wymieni rury, potem "
                        "glazurnik położy nowe płytki."),
    "sv-semester": ("sv", "Semesteransökan för sommaren ska lämnas till chefen senast den sista mars. "
                          "Minst tre veckor i följd är garanterade under juli."),
    "sv-el": ("sv", "Elräkningen blev dubbelt så hög i januari eftersom elpriset steg under kylan. "
                    "Vi funderar på att byta till ett fast avtal."),
    "sv-bibliotek": ("sv", "Biblioteket lånar ut böcker i fyra veckor och man kan förlänga lånet två "
                           "gånger via webbplatsen, om ingen annan har reserverat boken."),
    "en-heating": ("en", "The heating in the office broke down again. Facilities will replace the "
                         "thermostat next week; until then portable heaters are in the storage room."),
    "en-passport": ("en", "Passport photos must be taken against a plain white background, without "
                          "glasses, and be no older than six months."),
    "en-train": ("en", "The night train to Edinburgh leaves London at 23:45; sleeper cabins must be "
                       "booked at least a day in advance."),
    "ja-gomi": ("ja", "燃えるゴミは月曜日と木曜日の朝八時までに出してください。瓶と缶は水曜日に回収されます。"),
    "ja-kaigi": ("ja", "来週の会議は金曜日の午後二時に延期されました。資料は前日までに共有フォルダに保存してください。"),
    "zh-wifi": ("zh", "如果路由器无法连接网络，请先拔掉电源等待三十秒，然后重新启动。如果仍然不行，请联系网络服务商。"),
}

#: (query, relevant document)
QUERIES = [
    # cross-lingual
    ("who fixes the broken heating in the flat and when", "de-heizung"),
    ("deadline to register a child for kindergarten", "de-kita"),
    ("my locked bicycle was stolen at the station, what does insurance need", "de-fahrrad"),
    ("flu shot at the pharmacy without an appointment", "fr-vaccin"),
    ("when must the rented moving truck be returned", "fr-demenagement"),
    ("water leak under the kitchen sink damaged the floor", "fr-fuite"),
    ("what to bring to renew a passport at the police station", "es-pasaporte"),
    ("Rezept für Paella mit Hähnchen und Safran", "es-paella"),
    ("how much notice to give before the lease renews", "es-alquiler"),
    ("discount if I pay a speeding fine quickly", "it-multa"),
    ("Zug nach Florenz wegen Streik ausgefallen, Rückerstattung", "it-treno"),
    ("how to store olive oil after opening", "it-olio"),
    ("dentist appointment moved to Friday", "pt-dentista"),
    ("arroser la laitue et attacher les tomates au potager", "pt-horta"),
    ("credit card blocked after a suspicious purchase abroad", "pt-banco"),
    ("how long does the bike shop need to repair a flat tyre", "nl-fiets"),
    ("tax return deadline and how to ask for an extension", "nl-belasting"),
    ("where can the dog run off the lead in the park", "nl-hond"),
    ("¿De qué andén sale el tren a Cracovia?", "pl-pociag"),
    ("how to book a visit with the family doctor", "pl-lekarz"),
    ("bathroom renovation: plumber first, then tiles", "pl-remont"),
    ("Urlaubsantrag für den Sommer, Frist beim Chef", "sv-semester"),
    ("why was the electricity bill twice as high in winter", "sv-el"),
    ("can I extend a library loan online", "sv-bibliotek"),
    ("Der Thermostat im Büro wird nächste Woche ersetzt", "en-heating"),
    ("requisitos para la foto del pasaporte", "en-passport"),
    ("Schlafwagen im Nachtzug nach Edinburgh buchen", "en-train"),
    ("which days is burnable garbage collected", "ja-gomi"),
    ("la réunion de la semaine prochaine est reportée à vendredi", "ja-kaigi"),
    ("the router has no internet connection, restart it", "zh-wifi"),
    # same-language
    ("Techniker für den Brenner am Donnerstag", "de-heizung"),
    ("Anzeige bei der Polizei wegen Fahrraddiebstahl", "de-fahrrad"),
    ("vaccin grippe pharmacie sans rendez-vous", "fr-vaccin"),
    ("plombier et assurance pour un dégât des eaux", "fr-fuite"),
    ("renovación automática del contrato de alquiler", "es-alquiler"),
    ("rimborso biglietto treno sciopero", "it-treno"),
    ("consulta no dentista adiada", "pt-dentista"),
    ("lekke band laten repareren bij de fietsenmaker", "nl-fiets"),
    ("bilety na pociąg do Krakowa", "pl-pociag"),
    ("förlänga lånet på biblioteket", "sv-bibliotek"),
    ("office heating broken, portable heaters", "en-heating"),
    ("sleeper cabin on the night train to Edinburgh", "en-train"),
    ("ゴミの収集日", "ja-gomi"),
    ("会議の延期と資料の共有", "ja-kaigi"),
    ("路由器无法上网怎么办", "zh-wifi"),
]
