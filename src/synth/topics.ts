/**
 * The real English words of the synthetic vocabulary, by topic. A preset with T
 * topics uses the first T lists; pseudo-words (vocab.ts) fill the rest of each
 * topic. Every word is lowercase a-z and appears once across all lists (tested).
 * Function words belong to no topic: they let prompts read as sentences.
 */
export interface Topic {
  name: string;
  words: readonly string[];
}

export const TOPICS: readonly Topic[] = [
  { name: 'ocean', words: ['ocean', 'sea', 'ship', 'sail', 'wave', 'tide', 'harbor', 'anchor', 'coral', 'reef', 'whale', 'fish', 'shore', 'beach', 'island', 'boat', 'captain', 'deck', 'storm', 'current', 'salt', 'sand', 'shell', 'dolphin', 'lighthouse', 'voyage', 'crew', 'mast', 'port', 'gull', 'net', 'across'] },
  { name: 'code', words: ['code', 'function', 'compile', 'variable', 'loop', 'array', 'string', 'compiler', 'debug', 'program', 'class', 'method', 'module', 'library', 'syntax', 'parser', 'binary', 'kernel', 'thread', 'memory', 'pointer', 'buffer', 'stack', 'heap', 'query', 'server', 'script', 'token', 'bug', 'test', 'type', 'return'] },
  { name: 'space', words: ['planet', 'star', 'orbit', 'rocket', 'moon', 'comet', 'galaxy', 'nebula', 'asteroid', 'telescope', 'astronaut', 'gravity', 'solar', 'lunar', 'cosmos', 'meteor', 'satellite', 'launch', 'crater', 'eclipse', 'mars', 'jupiter', 'saturn', 'venus', 'nova', 'quasar', 'pulsar', 'vacuum', 'shuttle', 'probe', 'around', 'sky'] },
  { name: 'music', words: ['song', 'melody', 'rhythm', 'guitar', 'piano', 'drum', 'violin', 'chord', 'note', 'tempo', 'harmony', 'singer', 'choir', 'concert', 'album', 'lyric', 'bass', 'flute', 'trumpet', 'orchestra', 'opera', 'jazz', 'band', 'stage', 'tune', 'verse', 'chorus', 'beat', 'scale', 'play', 'sing', 'dance'] },
  { name: 'forest', words: ['tree', 'forest', 'leaf', 'branch', 'root', 'moss', 'fern', 'pine', 'oak', 'maple', 'bark', 'trail', 'deer', 'owl', 'fox', 'bear', 'wolf', 'acorn', 'mushroom', 'canopy', 'grove', 'meadow', 'river', 'stream', 'willow', 'birch', 'cedar', 'squirrel', 'hawk', 'berry'] },
  { name: 'kitchen', words: ['bread', 'butter', 'cheese', 'soup', 'onion', 'garlic', 'pepper', 'oven', 'spoon', 'knife', 'fork', 'plate', 'bowl', 'flour', 'sugar', 'honey', 'apple', 'lemon', 'tomato', 'potato', 'rice', 'noodle', 'bake', 'roast', 'boil', 'recipe', 'chef', 'dinner', 'lunch', 'salad'] },
  { name: 'city', words: ['street', 'building', 'tower', 'bridge', 'traffic', 'subway', 'taxi', 'market', 'plaza', 'avenue', 'park', 'station', 'office', 'apartment', 'tram', 'corner', 'alley', 'lamp', 'crowd', 'mayor', 'district', 'skyline', 'bus', 'cafe', 'gallery', 'sidewalk', 'downtown', 'suburb', 'citizen', 'council'] },
  { name: 'weather', words: ['rain', 'snow', 'cloud', 'wind', 'thunder', 'lightning', 'fog', 'frost', 'hail', 'sunshine', 'breeze', 'drizzle', 'humidity', 'forecast', 'temperature', 'season', 'winter', 'summer', 'autumn', 'ice', 'mist', 'rainbow', 'monsoon', 'cyclone', 'tornado', 'drought', 'flood', 'climate', 'warm', 'cold'] },
  { name: 'medicine', words: ['doctor', 'nurse', 'hospital', 'patient', 'fever', 'vaccine', 'virus', 'heart', 'lung', 'blood', 'bone', 'muscle', 'nerve', 'surgery', 'clinic', 'pill', 'dose', 'therapy', 'cure', 'symptom', 'pulse', 'vein', 'organ', 'brain', 'skin', 'wound', 'bandage', 'health', 'diet', 'sleep'] },
  { name: 'sport', words: ['football', 'soccer', 'tennis', 'golf', 'goal', 'team', 'player', 'coach', 'match', 'referee', 'score', 'league', 'race', 'runner', 'sprint', 'marathon', 'ball', 'bat', 'racket', 'court', 'field', 'stadium', 'medal', 'trophy', 'jump', 'swim', 'skate', 'hockey', 'win', 'champion'] },
  { name: 'finance', words: ['money', 'bank', 'loan', 'credit', 'debt', 'price', 'stock', 'bond', 'share', 'profit', 'budget', 'invoice', 'tax', 'coin', 'cash', 'wallet', 'payment', 'salary', 'interest', 'asset', 'fund', 'trade', 'broker', 'dividend', 'equity', 'revenue', 'account', 'ledger', 'investor', 'economy'] },
  { name: 'history', words: ['king', 'queen', 'empire', 'castle', 'knight', 'sword', 'battle', 'war', 'treaty', 'crown', 'throne', 'ancient', 'ruin', 'temple', 'pharaoh', 'dynasty', 'scroll', 'legend', 'siege', 'army', 'soldier', 'kingdom', 'peasant', 'monk', 'abbey', 'fort', 'relic', 'emperor', 'chronicle', 'century'] },
  { name: 'farm', words: ['cow', 'horse', 'sheep', 'goat', 'pig', 'chicken', 'barn', 'tractor', 'wheat', 'corn', 'hay', 'harvest', 'farmer', 'plow', 'seed', 'soil', 'orchard', 'fence', 'pasture', 'milk', 'egg', 'cattle', 'crop', 'barley', 'oats', 'hen', 'rooster', 'stable', 'silo', 'tractors'] },
  { name: 'art', words: ['paint', 'brush', 'canvas', 'color', 'sketch', 'portrait', 'sculpture', 'statue', 'ink', 'pencil', 'palette', 'frame', 'artist', 'museum', 'pastel', 'charcoal', 'mural', 'fresco', 'easel', 'studio', 'texture', 'shadow', 'light', 'pattern', 'design', 'style', 'craft', 'clay', 'drawing', 'exhibit'] },
  { name: 'travel', words: ['train', 'plane', 'airport', 'ticket', 'passport', 'luggage', 'hotel', 'journey', 'map', 'route', 'tourist', 'guide', 'suitcase', 'flight', 'border', 'visa', 'holiday', 'trip', 'camp', 'tent', 'hike', 'road', 'highway', 'compass', 'postcard', 'souvenir', 'cruise', 'arrival', 'departure', 'backpack'] },
  { name: 'school', words: ['teacher', 'student', 'lesson', 'classroom', 'homework', 'exam', 'grade', 'chalk', 'desk', 'book', 'notebook', 'pen', 'eraser', 'ruler', 'science', 'math', 'reading', 'writing', 'history', 'recess', 'principal', 'diploma', 'campus', 'lecture', 'essay', 'quiz', 'semester', 'tutor', 'pupil', 'study'] },
];

/** Topic-less glue words for prompts; greedy generation never produces them. */
export const FUNCTION_WORDS: readonly string[] = [
  'the', 'a', 'an', 'and', 'or', 'of', 'in', 'on', 'to', 'with', 'over', 'under', 'from', 'at', 'by', 'for',
  'is', 'are', 'was', 'will', 'we', 'i', 'you', 'it', 'this', 'that', 'my', 'our', 'their', 'into', 'then', 'as',
];
